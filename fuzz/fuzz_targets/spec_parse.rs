//! Compression specifications: any string parses or fails with an error, and a
//! parsed specification (or list) prints as text that parses back to itself.
#![no_main]

use codec::{parse_spec_list, Spec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(spec) = s.parse::<Spec>() {
        let text = spec.to_string();
        assert_eq!(text.parse::<Spec>(), Ok(spec), "{s:?} printed as {text:?}");
    }
    if let Ok(list) = parse_spec_list(s) {
        assert!(!list.is_empty());
        let text = list
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(
            parse_spec_list(&text),
            Ok(list),
            "{s:?} printed as {text:?}"
        );
    }
});
