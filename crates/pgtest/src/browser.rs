//! Headless Chromium, the oracle of the HTML reports' tests (`wal advise --html`, `bench tunnel --html`).
//!
//! A report is checked the way a user sees it: a real browser loads the page, and the test reads back
//! the DOM the browser built ([`Chromium::dom`]) and a screenshot of what it drew
//! ([`Chromium::screenshot`], decoded by [`Screenshot::read`]). The browser is Debian's `chromium`
//! package, which scripts/setup.sh installs through scripts/chromium.sh.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::run::run_as_current_user;
use crate::{Error, Result};

/// How long one Chromium run may take before it is killed.
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// Flags that keep headless Chromium off the network and working as root (no sandbox there).
const FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// The installed browser.
#[derive(Debug)]
pub struct Chromium {
    program: PathBuf,
}

impl Chromium {
    /// Finds `chromium` on PATH and checks that it runs; the error says how to install it.
    pub fn find() -> Result<Chromium> {
        let missing = || Error::Io {
            context:
                "chromium is not installed: run `bash scripts/setup.sh` (it installs Debian's \
                      chromium through scripts/chromium.sh)"
                    .into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let program = crate::which("chromium").ok_or_else(missing)?;
        run_as_current_user(Command::new(&program).arg("--version"), None, TIMEOUT)?;
        Ok(Chromium { program })
    }

    /// The DOM Chromium built from `page` (a local file), serialised as HTML.
    pub fn dom(&self, page: &Path) -> Result<String> {
        let out = self.run(page, &["--dump-dom"])?;
        String::from_utf8(out).map_err(|e| Error::Io {
            context: format!("chromium --dump-dom {}", page.display()),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })
    }

    /// Draws `page` in a `width` x `height` window and writes the PNG to `png`.
    pub fn screenshot(&self, page: &Path, width: u32, height: u32, png: &Path) -> Result<()> {
        self.run(
            page,
            &[
                &format!("--window-size={width},{height}"),
                &format!("--screenshot={}", png.display()),
            ],
        )?;
        Ok(())
    }

    /// Runs the browser on `page` with [`FLAGS`], a throwaway profile and `extra`; its stdout.
    fn run(&self, page: &Path, extra: &[&str]) -> Result<Vec<u8>> {
        let profile = tempfile::tempdir().map_err(|source| Error::Io {
            context: "creating a Chromium profile directory".into(),
            source,
        })?;
        let out = run_as_current_user(
            Command::new(&self.program)
                .args(FLAGS)
                .arg(format!("--user-data-dir={}", profile.path().display()))
                .args(extra)
                .arg(format!("file://{}", page.display())),
            None,
            TIMEOUT,
        )?;
        Ok(out.stdout)
    }
}

/// A screenshot's pixels, 8 bits per channel.
#[derive(Debug)]
pub struct Screenshot {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Bytes per pixel: 3 (RGB) or 4 (RGBA).
    pub bpp: usize,
    /// Rows top to bottom, `width * bpp` bytes each.
    pub pixels: Vec<u8>,
}

impl Screenshot {
    /// Decodes the PNG Chromium wrote.
    pub fn read(path: &Path) -> Result<Screenshot> {
        let bad = |e: png::DecodingError| Error::Io {
            context: format!("decoding {}", path.display()),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        };
        let file = std::fs::File::open(path).map_err(|source| Error::Io {
            context: format!("opening {}", path.display()),
            source,
        })?;
        let mut dec = png::Decoder::new(std::io::BufReader::new(file));
        dec.set_transformations(png::Transformations::normalize_to_color8());
        let mut reader = dec.read_info().map_err(bad)?;
        let mut pixels = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut pixels).map_err(bad)?;
        let bpp = match info.color_type {
            png::ColorType::Rgb => 3,
            png::ColorType::Rgba => 4,
            other => {
                return Err(Error::Io {
                    context: format!("{}: PNG colour type {other:?}, not RGB(A)", path.display()),
                    source: std::io::Error::from(std::io::ErrorKind::InvalidData),
                })
            }
        };
        pixels.truncate(info.buffer_size());
        Ok(Screenshot {
            width: info.width as usize,
            height: info.height as usize,
            bpp,
            pixels,
        })
    }

    /// The top `rows` rows only (all of them when the image is shorter).
    pub fn top(mut self, rows: usize) -> Screenshot {
        self.height = self.height.min(rows);
        self.pixels.truncate(self.width * self.height * self.bpp);
        self
    }

    /// Pixels of exactly the colour `rgb`.
    pub fn count(&self, rgb: [u8; 3]) -> usize {
        self.rgb().filter(|p| *p == rgb).count()
    }

    /// Distinct colours: a page that did not render is a few flat colours.
    pub fn colours(&self) -> usize {
        self.rgb().collect::<std::collections::HashSet<_>>().len()
    }

    fn rgb(&self) -> impl Iterator<Item = [u8; 3]> + '_ {
        self.pixels
            .chunks_exact(self.bpp)
            .map(|p| [p[0], p[1], p[2]])
    }
}
