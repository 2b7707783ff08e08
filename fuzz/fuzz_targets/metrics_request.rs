//! The `--metrics` endpoint's request rules on arbitrary bytes, read in pieces as a socket
//! gives them: never panics, asks for more only while the head is incomplete and within
//! `MAX_REQUEST`, renders only for `GET /metrics`, and every response states the length of
//! what follows its head.
#![no_main]

use libfuzzer_sys::fuzz_target;
use service::scrape::{request, response, Request, MAX_REQUEST};

fuzz_target!(|data: &[u8]| {
    // Byte 0: the size of each read (1 to 256); the rest: what the scraper sends.
    let Some((&size, sent)) = data.split_first() else {
        return;
    };
    let mut head = Vec::new();
    for piece in sent.chunks(usize::from(size) + 1) {
        head.extend_from_slice(piece);
        let asked = request(&head);
        if asked == Request::Incomplete {
            assert!(head.len() <= MAX_REQUEST);
            continue;
        }
        let mut rendered = false;
        let reply = response(asked, || {
            rendered = true;
            "up 1\n# EOF\n".to_owned()
        });
        assert_eq!(rendered, asked == Request::Metrics);
        let text = String::from_utf8(reply).expect("a response is text");
        let (head_text, body) = text.split_once("\r\n\r\n").expect("head and body");
        assert!(head_text.contains(&format!("\r\nContent-Length: {}\r\n", body.len())));
        return;
    }
});
