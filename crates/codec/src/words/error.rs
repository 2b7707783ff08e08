//! Why a word-coded buffer does not decode.

use crate::cursor::ShortRead;

/// A word-coded buffer that does not decode: where (an offset in the coded input) and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WordsError {
    /// The header or dictionary ends before its fields do.
    #[error("word-coded header cut short: {0}")]
    Short(#[from] ShortRead),
    /// The decoded length in the header is above the caller's cap.
    #[error("decoded length {len} is above the {cap}-byte limit")]
    TooLong {
        /// The length the header claims.
        len: u64,
        /// The cap.
        cap: usize,
    },
    /// The decoded length is more than the body could give even if every byte were the
    /// dictionary's longest word.
    #[error("decoded length {len} cannot come from {body} body bytes with words of at most {longest} bytes")]
    Implausible {
        /// The length the header claims.
        len: usize,
        /// Bytes in the coded body.
        body: usize,
        /// The longest dictionary word.
        longest: usize,
    },
    /// The escape byte and the capital marker are the same byte.
    #[error("escape and capital marker are the same byte {byte:#04x}")]
    SameMarker {
        /// The byte.
        byte: u8,
    },
    /// A byte is given two roles (code, prefix, escape, marker) in the header.
    #[error("at offset {offset}: code byte {byte:#04x} given twice")]
    CodeTwice {
        /// Offset of the second mention.
        offset: usize,
        /// The byte.
        byte: u8,
    },
    /// The dictionary's last word has no terminating zero byte.
    #[error("at offset {offset}: dictionary does not end with a zero byte")]
    Unterminated {
        /// Offset of the dictionary's last byte.
        offset: usize,
    },
    /// The dictionary holds more words than there are codes.
    #[error("{words} dictionary words for {codes} codes")]
    TooManyWords {
        /// Words in the dictionary.
        words: usize,
        /// Codes the header defines.
        codes: usize,
    },
    /// The body ends inside a symbol (after an escape, a capital marker or a prefix).
    #[error("at offset {offset}: {what} at the end of the input")]
    CutShort {
        /// Offset of the symbol.
        offset: usize,
        /// What the symbol's first byte was.
        what: &'static str,
    },
    /// A capital marker is followed by a byte that is not a code.
    #[error("at offset {offset}: capital marker not followed by a word")]
    CapitalNotWord {
        /// Offset of the marker.
        offset: usize,
    },
    /// A capital marker is followed by the code of an empty word.
    #[error("at offset {offset}: capital marker on an empty word")]
    CapitalEmpty {
        /// Offset of the marker.
        offset: usize,
    },
    /// A code names a word the dictionary does not have.
    #[error("at offset {offset}: code for word {word}, the dictionary has {words}")]
    NoSuchWord {
        /// Offset of the code.
        offset: usize,
        /// The word's number.
        word: usize,
        /// Words in the dictionary.
        words: usize,
    },
    /// The body decodes to more than the header's length.
    #[error("at offset {offset}: decodes to more than {len} bytes")]
    Overrun {
        /// Offset of the symbol that does not fit.
        offset: usize,
        /// The length the header claims.
        len: usize,
    },
    /// The body decodes to fewer bytes than the header's length.
    #[error("decodes to {got} bytes, expected {len}")]
    Underrun {
        /// Bytes decoded.
        got: usize,
        /// The length the header claims.
        len: usize,
    },
}
