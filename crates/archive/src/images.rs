//! The page images of a segment being pushed, compressed as the split finds them.
//!
//! Page images are most of a segment of pgbench WAL. Gathered into a stream first, they are
//! up to 16 MB of fresh memory written once and read once by the compressor: a page fault
//! for every 4 KiB and a copy the cache does not hold. With zstd they go instead straight
//! into one streaming frame, which holds a window's worth of them at a time, and the
//! container stores that frame as the images stream's only part. Such a frame does not
//! state its size; [`codec::PartFeed`] caps its window by the part's size (see there).
//!
//! Text in page images is worth word coding ([`crate::words`]) before compression, and word
//! coding needs the whole stream, so the images are judged on their first
//! [`words::JUDGED_LEN`] bytes first: only when word coding clearly would not pay there are
//! they streamed; otherwise they are gathered as before and word-coded when that pays.

use std::io::Write;

use codec::{words, CodecError, Encoder, Method, Spec};

/// The images of a split, once it is done.
#[derive(Debug)]
pub(crate) enum Images {
    /// Gathered whole: few of them, text-like, or a method that is not streamed.
    Kept(Vec<u8>),
    /// One zstd frame (without a stated size) of `len` bytes of images.
    Streamed { frame: Vec<u8>, len: usize },
}

/// Where the split puts the page images it finds (see the module's documentation).
pub(crate) struct ImageStream {
    spec: Spec,
    /// How large the compressed frame may get, reserved up front (address space only).
    frame_room: usize,
    state: State,
}

enum State {
    /// The first images, until there are enough to judge them.
    Judging(Vec<u8>),
    /// Images gathered whole.
    Kept(Vec<u8>),
    /// Images compressed as they come, and how many bytes of them so far.
    Streaming(Encoder<Vec<u8>>, usize),
    /// The encoder failed; reported by [`ImageStream::finish`].
    Failed(CodecError),
}

impl ImageStream {
    /// A stream for the images of up to `room` bytes of segment, compressed with `spec`, or
    /// `None` when `spec` is not one whose frames [`codec::PartFeed`] decodes a window at a
    /// time without a stated size (zstd up to level 19, without long-distance matching).
    pub(crate) fn new(spec: &Spec, room: usize) -> Option<ImageStream> {
        codec::PartFeed::reads_streamed(spec).then(|| ImageStream {
            spec: *spec,
            frame_room: codec::block::max_compressed_size(Method::Zstd, room),
            state: State::Judging(Vec::new()),
        })
    }

    /// Adds the next page image.
    pub(crate) fn put(&mut self, image: &[u8]) {
        match &mut self.state {
            State::Judging(start) => {
                start.extend_from_slice(image);
                if start.len() >= words::JUDGED_LEN {
                    let start = std::mem::take(start);
                    self.state = if words::declines_on_start(&start) {
                        self.stream(&start)
                    } else {
                        State::Kept(start)
                    };
                }
            }
            State::Kept(all) => all.extend_from_slice(image),
            State::Streaming(enc, len) => match enc.write_all(image) {
                Ok(()) => *len += image.len(),
                Err(source) => self.state = State::Failed(zstd_error(source)),
            },
            State::Failed(_) => {}
        }
    }

    /// The encoder, fed with `start`.
    fn stream(&self, start: &[u8]) -> State {
        let frame = Vec::with_capacity(self.frame_room);
        Encoder::new(&self.spec, frame)
            .and_then(|mut enc| {
                enc.write_all(start).map_err(zstd_error)?;
                Ok(State::Streaming(enc, start.len()))
            })
            .unwrap_or_else(State::Failed)
    }

    /// The images, gathered or compressed.
    pub(crate) fn finish(self) -> Result<Images, CodecError> {
        match self.state {
            State::Judging(all) | State::Kept(all) => Ok(Images::Kept(all)),
            State::Streaming(enc, len) => Ok(Images::Streamed {
                frame: enc.finish()?,
                len,
            }),
            State::Failed(e) => Err(e),
        }
    }
}

/// A failed write to the zstd encoder.
fn zstd_error(source: std::io::Error) -> CodecError {
    CodecError::Library {
        method: Method::Zstd,
        source,
    }
}

impl std::fmt::Debug for ImageStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageStream")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Page-sized images: `n` of them, binary (little to word-code) or prose.
    fn images(n: usize, prose: bool) -> Vec<Vec<u8>> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let text = b"the archive keeps every segment the primary writes, and the standby \
            replays them in order; nothing is lost when a process dies. ";
        (0..n)
            .map(|i| {
                (0..8000)
                    .map(|j| {
                        if prose {
                            text[(i * 31 + j) % text.len()]
                        } else {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            // Mostly small values, as in heap pages: compressible, no words.
                            if j % 4 == 0 {
                                x as u8
                            } else {
                                (x % 3) as u8
                            }
                        }
                    })
                    .collect()
            })
            .collect()
    }

    fn feed(stream: &mut ImageStream, images: &[Vec<u8>]) -> Vec<u8> {
        let mut all = Vec::new();
        for image in images {
            stream.put(image);
            all.extend_from_slice(image);
        }
        all
    }

    fn zstd3() -> Spec {
        "zstd:3".parse().expect("spec")
    }

    #[test]
    fn binary_images_become_one_frame_that_decodes_to_them() {
        let mut stream = ImageStream::new(&zstd3(), 16 << 20).expect("zstd streams");
        let all = feed(&mut stream, &images(400, false));
        let Images::Streamed { frame, len } = stream.finish().expect("finish") else {
            panic!("binary images were not streamed");
        };
        assert_eq!(len, all.len());
        assert!(frame.len() < all.len(), "not compressed: {}", frame.len());
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&frame).ok(),
            Some(None),
            "a streamed frame states no size"
        );
        let mut part = codec::PartFeed::new(Method::Zstd, vec![(&frame, len)]);
        let mut back = vec![0u8; len + 1];
        let mut n = 0;
        loop {
            let k = part.read(&mut back[n..]).expect("decodes");
            if k == 0 {
                break;
            }
            n += k;
        }
        assert!(n == len && back[..n] == all[..], "bytes differ");
    }

    #[test]
    fn text_few_images_and_other_methods_are_kept_whole() {
        let mut stream = ImageStream::new(&zstd3(), 16 << 20).expect("zstd streams");
        let all = feed(&mut stream, &images(400, true));
        match stream.finish().expect("finish") {
            Images::Kept(kept) => assert!(kept == all, "kept bytes differ"),
            Images::Streamed { .. } => panic!("text was streamed, never to be word-coded"),
        }
        // Under the judged length nothing is decided: kept, as before streaming existed.
        let mut stream = ImageStream::new(&zstd3(), 16 << 20).expect("zstd streams");
        let few = images(words::JUDGED_LEN / 8000 - 1, false);
        let all = feed(&mut stream, &few);
        assert!(matches!(stream.finish(), Ok(Images::Kept(k)) if k == all));
        for spec in ["lz4", "zstd:level=3,long=27", "zstd:20", "xz:1"] {
            let spec: Spec = spec.parse().expect("spec");
            assert!(ImageStream::new(&spec, 16 << 20).is_none(), "{spec}");
        }
    }
}
