//! Word coding: text (inside WAL streams, pgoutput spill files), rewritten so that a general-purpose compressor sees
//! words instead of letters.
//!
//! zstd codes literals one byte at a time with one Huffman table, so prose costs it about
//! three bits a letter even when the same few thousand words come back again and again.
//! Here the most frequent words of a stream (lower-case ASCII letters, with the space after
//! them when there is one) get one- or two-byte codes taken from the byte values the stream
//! uses least; a capitalised word is a marker byte and the word's code. Everything else is
//! copied, and a copied byte that happens to be a code value is preceded by an escape byte,
//! so any input comes back exactly. [`encode`] declines (returns `None`) when the words it
//! would code do not outweigh the escapes and the dictionary, which is the case for binary
//! streams such as pgbench's.
//!
//! Words are counted on one 64 KiB block in four; a stream of 1 MiB or more is first judged
//! on sixteen 16 KiB blocks spread over it and declined at once when even that estimate is
//! far from paying, so a binary stream costs about a quarter of a megabyte of counting.
//! Counting and coding read words eight bytes at a time and look them up in open-addressing
//! tables that point into the data instead of holding copies of it. Decoding goes through
//! a table with one entry per symbol (a byte, or a prefix or marker and the byte after it)
//! telling what to copy; capitalised words are copied from an upper-cased copy of the
//! dictionary; anything unusual (long words, damage) takes a slower path that checks each
//! step.
//!
//! Coded form, little-endian: decoded length u64; escape byte; capital marker byte; count
//! `n1` and the `n1` one-byte code values; count `n2` and the `n2` prefix values (a prefix
//! and any following byte is a two-byte code); dictionary length u32 and the dictionary
//! (the words in code order, each followed by a zero byte: one-byte codes first, then
//! prefix 0 second byte 0..=255, prefix 1, ...); the coded body.
//!
//! The coded bytes are part of the archive container format: they must never change (the
//! digests in `tests/words_golden.rs` hold them). [`decode`] reads the header with checked
//! reads, checks the decoded length against the caller's cap and against what the body can
//! give before allocating, and reports damage as a [`WordsError`] saying where.
//!
//! The code is split by concern: `scan` finds and counts words, `dict` ranks them
//! into a dictionary and looks words up in it, `encoder` writes the coded form, `header`
//! reads it back, `decoder` and `fast` decode the body.

mod decoder;
mod dict;
mod encoder;
mod error;
mod fast;
mod header;
mod scan;
#[cfg(test)]
mod tests;

pub use decoder::{decode, Reader};
pub use encoder::{declines_on_start, encode, JUDGED_LEN};
pub use error::WordsError;

/// One-byte codes.
const ONE: usize = 94;
/// Prefixes of two-byte codes (each opens 256 codes).
const PREFIXES: usize = 32;
/// Most words a dictionary holds.
const MAX_WORDS: usize = ONE + PREFIXES * 256;
/// Code values taken from the byte alphabet: escape, capital marker, one-byte codes, prefixes.
const RESERVED: usize = 2 + ONE + PREFIXES;
/// Longest word coded (letters, without the trailing space).
const MAX_WORD: usize = 32;
