//! `history.bin`: the run's history saved in the results folder, so `emq-bench check` can be
//! re-run later. Versioned: magic `EMQHIST5` (its header's `event_version` says the events'
//! encoding: 5, claims carry their holder; `EMQHIST3` files, encodings 3 and 4, and `EMQHIST2`
//! files, whose enqueues already keep the id's time part, are still read; a build that reads
//! every stream in its own encoding refuses the new magic instead of misreading it), a JSON
//! header, then the load threads' streams as recorded (the compact varint encoding of
//! `buffer.rs`; a thread's history is one stream per 1 MiB chunk, each decoding on its own).
//!
//! Layout: `EMQHIST5` · u32 LE header length · header JSON · u32 LE stream count ·
//! for each stream: u64 LE length · bytes.
//!
//! A run writes its history as it records it (`super::spool`): magic `EMQHIST6` (events in
//! the encoding its headers say; `EMQHIST4` files, encodings 3 and 4, are still read), then
//! records, each `H` · u32 LE length · header JSON or `S` · u64 LE
//! length · one stream's bytes, in the order written. The last header counts: the first one
//! says the run has not ended (`complete: false`), the last record of a run that ended is its
//! final header. A file cut inside a record (a run killed while it wrote) reads up to the last
//! whole record.
//!
//! A streamed history is written in segments: `history.bin`, then `history.1.bin`,
//! `history.2.bin`, ... beside it ([`segment_path`]), each a streamed file of its own (magic,
//! header record, streams), so a week-long history is never one file. Readers read them in
//! turn; the header that counts is the last one of the last segment.

use super::HistoryHeader;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// The file's magic and format version, as this build writes it.
pub const MAGIC: &[u8; 8] = b"EMQHIST5";
/// The magic of the layout before claims carried holders (event encodings 3 and 4), still read.
const MAGIC_V3: &[u8; 8] = b"EMQHIST3";
/// The magic of the version before it (no worker in its events), still read.
const MAGIC_V2: &[u8; 8] = b"EMQHIST2";
/// The magic of the streamed layout (records appended as the run goes; events in the encoding
/// its header records say).
pub const STREAMED_MAGIC: &[u8; 8] = b"EMQHIST6";
/// The streamed layout's magic before claims carried holders (event encodings 3 and 4), still
/// read.
const STREAMED_MAGIC_V4: &[u8; 8] = b"EMQHIST4";
/// A streamed file's header record.
pub(crate) const RECORD_HEADER: u8 = b'H';
/// A streamed file's stream record.
pub(crate) const RECORD_STREAM: u8 = b'S';

/// Why a history file could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryFileError {
    /// An I/O error.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Not a history file of this version.
    #[error("{}: not an emq-bench history this build reads (expected magic EMQHIST6, EMQHIST5, EMQHIST4, EMQHIST3 or EMQHIST2)", path.display())]
    Magic {
        /// The file.
        path: PathBuf,
    },
    /// Written by a newer emq-bench, in an event encoding this build cannot read.
    #[error("{}: written by a newer emq-bench (event encoding {version}; this build reads up to {}): check it with that version", path.display(), super::EVENT_VERSION)]
    Newer {
        /// The file.
        path: PathBuf,
        /// The encoding its header names.
        version: u8,
    },
    /// The header JSON is malformed.
    #[error("{}: bad history header: {source}", path.display())]
    Header {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// A stream's events do not decode (a corrupt file, or one this build cannot read).
    #[error("{}: {which} does not decode: {source}", path.display())]
    Decode {
        /// The file.
        path: PathBuf,
        /// Which stream: "stream N" (1-based, in file order) when known.
        which: String,
        /// Where in it and why.
        source: super::DecodeError,
    },
    /// The file ends before what its own lengths announce (a full disk, an interrupted copy):
    /// `expected` names the section cut short, where it starts and how much of it is there.
    #[error("{}: truncated: the file ends at byte {size}, expected {expected}", path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// The file's length, bytes.
        size: u64,
        /// The section that is cut short, e.g. "stream 2 of 3: 4000 bytes from byte 1008 (...)".
        expected: String,
    },
}

/// Writes `header` and `streams` to `path` atomically (via `history.bin.tmp` and a rename).
pub fn save(path: &Path, header: &HistoryHeader, streams: &[Vec<u8>]) -> Result<(), HistoryFileError> {
    let io = |source| HistoryFileError::Io { path: path.to_path_buf(), source };
    crate::atomic::write(path, io, |out| {
        let json = serde_json::to_vec(header).expect("header serializes");
        out.write_all(MAGIC).map_err(io)?;
        out.write_all(&(json.len() as u32).to_le_bytes()).map_err(io)?;
        out.write_all(&json).map_err(io)?;
        out.write_all(&(streams.len() as u32).to_le_bytes()).map_err(io)?;
        for stream in streams {
            out.write_all(&(stream.len() as u64).to_le_bytes()).map_err(io)?;
            out.write_all(stream).map_err(io)?;
        }
        Ok(())
    })
}

/// Reads a history file: its header and raw streams.
///
/// Errors: I/O; a wrong magic (another file or version); a malformed header; or
/// [`HistoryFileError::Truncated`] when the file ends before a section its lengths announce:
/// the magic, the header (its length or its JSON), the stream count, a stream's length, or a
/// stream's bytes (then also in which of its events the file ends). Each length is checked
/// against the file's size before anything is allocated for it.
pub fn load(path: &Path) -> Result<(HistoryHeader, Vec<Vec<u8>>), HistoryFileError> {
    let mut streams = Vec::new();
    let header = each_stream(path, |_, stream| {
        streams.push(stream);
        Ok(())
    })?;
    Ok((header, streams))
}

/// Reads a history file one stream at a time: `sink(version, bytes)` gets each stream as it is
/// read (`version`: its events' encoding, [`super::buffer::decode_version`]'s argument), in file
/// order; returns the header (the last one, for a streamed file). What [`load`] keeps, without
/// keeping it: a reader that partitions the history holds one stream at a time.
///
/// Errors: those of [`load`], and whatever `sink` returns (reading stops there).
pub fn each_stream(
    path: &Path,
    mut sink: impl FnMut(u8, Vec<u8>) -> Result<(), HistoryFileError>,
) -> Result<HistoryHeader, HistoryFileError> {
    let io = |source| HistoryFileError::Io { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let mut input = Sections { input: BufReader::new(file), at: 0, size, path };
    let not_history = || HistoryFileError::Magic { path: path.to_path_buf() };
    let magic = match input.take(8, |there| format!("the 8-byte magic EMQHIST5 at byte 0 ({there} there)")) {
        Ok(magic) => magic,
        // Fewer than 8 bytes: a prefix of the magic is a history cut short, anything else is
        // another file.
        Err(cut @ HistoryFileError::Truncated { .. }) => {
            return Err(if MAGIC.starts_with(&input.rest()?) { cut } else { not_history() });
        }
        Err(other) => return Err(other),
    };
    // EMQHIST5's and EMQHIST3's headers say their events' encoding; EMQHIST2's events are 2.
    let version = match magic.as_slice() {
        m if m == MAGIC || m == MAGIC_V3 => None,
        m if m == MAGIC_V2 => Some(2),
        m if m == STREAMED_MAGIC || m == STREAMED_MAGIC_V4 => return load_segments(path, input, &magic, sink),
        _ => return Err(not_history()),
    };
    let at = input.at;
    let len = input.u32(|| format!("the header's 4-byte length at byte {at}"))?;
    let at = input.at;
    let json = input
        .take(u64::from(len), |there| format!("the header: {len} bytes of JSON from byte {at} ({there} there)"))?;
    let mut header: HistoryHeader = serde_json::from_slice(&json)
        .map_err(|source| HistoryFileError::Header { path: path.to_path_buf(), source })?;
    let version = version.unwrap_or(header.event_version);
    if version > super::EVENT_VERSION {
        return Err(HistoryFileError::Newer { path: path.to_path_buf(), version });
    }
    header.event_version = version;
    let at = input.at;
    let count = input.u32(|| format!("the 4-byte stream count at byte {at}"))?;
    for k in 1..=count {
        let at = input.at;
        let mut len8 = [0u8; 8];
        len8.copy_from_slice(&input.take(8, |_| format!("the 8-byte length of stream {k} of {count} at byte {at}"))?);
        let len = u64::from_le_bytes(len8);
        let (at, there) = (input.at, input.size - input.at);
        if len > there {
            // Where in the stream's events the file ends: the part that is there decodes up
            // to the event that is cut.
            let events = match super::buffer::decode_version(&input.rest()?, version) {
                _ if there == 0 => String::new(),
                Ok(events) => format!("; the file ends after its event {}", events.len()),
                Err(e) => format!("; the file ends inside its event {}, after {} whole events", e.event + 1, e.event),
            };
            return Err(
                input.truncated(format!("stream {k} of {count}: {len} bytes from byte {at} ({there} there{events})"))
            );
        }
        sink(
            version,
            input.take(len, |there| format!("stream {k} of {count}: {len} bytes from byte {at} ({there} there)"))?,
        )?;
    }
    Ok(header)
}

/// The path of segment `k` of the streamed history whose first segment is `first`:
/// `history.bin` itself for 0, then `history.1.bin`, `history.2.bin`, ... beside it.
pub fn segment_path(first: &Path, k: u32) -> PathBuf {
    if k == 0 {
        return first.to_path_buf();
    }
    let stem = first.file_stem().map_or_else(Default::default, |s| s.to_string_lossy().into_owned());
    let name = match first.extension() {
        Some(ext) => format!("{stem}.{k}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{k}"),
    };
    first.with_file_name(name)
}

/// The bytes of the history whose first file is `path`, every segment of a streamed one
/// included (what a check has to read).
///
/// Errors: the first file's metadata cannot be read.
pub fn history_bytes(path: &Path) -> Result<u64, HistoryFileError> {
    let io = |source| HistoryFileError::Io { path: path.to_path_buf(), source };
    let mut total = std::fs::metadata(path).map_err(io)?.len();
    for k in 1.. {
        match std::fs::metadata(segment_path(path, k)) {
            Ok(meta) => total += meta.len(),
            Err(_) => break,
        }
    }
    Ok(total)
}

/// A streamed history's segments in turn: the first (`input`, after its magic), then
/// `history.1.bin`, ... while they exist. Each segment starts with its magic and a header
/// record; the header that counts is the last segment's last one.
///
/// Errors: those of [`load_streamed`] for any segment; a later segment whose magic is not the
/// first's (`magic`).
fn load_segments(
    first: &Path,
    mut input: Sections,
    magic: &[u8],
    mut sink: impl FnMut(u8, Vec<u8>) -> Result<(), HistoryFileError>,
) -> Result<HistoryHeader, HistoryFileError> {
    let at = input.at;
    let mut header = load_streamed(&mut input, &mut sink)?
        .ok_or_else(|| input.truncated(format!("a header record after the 8-byte magic at byte {at}")))?;
    for k in 1.. {
        let path = segment_path(first, k);
        let io = |source| HistoryFileError::Io { path: path.clone(), source };
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => return Err(io(e)),
        };
        let size = file.metadata().map_err(io)?.len();
        let mut input = Sections { input: BufReader::new(file), at: 0, size, path: &path };
        // A segment cut before its first whole header (a run killed as it rotated) adds
        // nothing: the history ends with the segment before.
        if size < 8 {
            break;
        }
        if input.take(8, |_| String::new())? != magic {
            return Err(HistoryFileError::Magic { path: path.clone() });
        }
        match load_streamed(&mut input, &mut sink)? {
            Some(read) => header = read,
            None => break,
        }
    }
    Ok(header)
}

/// The records of a streamed file (after its magic), up to its end or to the record it cuts;
/// returns its last header (none when no header record is whole).
///
/// Errors: I/O; a malformed header; a record of an unknown kind.
fn load_streamed(
    input: &mut Sections,
    mut sink: impl FnMut(u8, Vec<u8>) -> Result<(), HistoryFileError>,
) -> Result<Option<HistoryHeader>, HistoryFileError> {
    let path = input.path;
    let mut header: Option<HistoryHeader> = None;
    while input.at < input.size {
        let at = input.at;
        let kind = input.take(1, |_| String::new())?[0];
        let there = input.size - input.at;
        let len = match kind {
            RECORD_HEADER if there >= 4 => u64::from(input.u32(String::new)?),
            RECORD_STREAM if there >= 8 => {
                let mut len8 = [0u8; 8];
                len8.copy_from_slice(&input.take(8, |_| String::new())?);
                u64::from_le_bytes(len8)
            }
            RECORD_HEADER | RECORD_STREAM => break,
            other => {
                return Err(input.truncated(format!(
                    "a record (H or S) at byte {at}, found byte {other:#04x}: the file is corrupt from there"
                )))
            }
        };
        if len > input.size - input.at {
            // Cut inside its last record: a run killed while it wrote.
            break;
        }
        let bytes = input.take(len, |_| String::new())?;
        match kind {
            RECORD_HEADER => {
                let read: HistoryHeader = serde_json::from_slice(&bytes)
                    .map_err(|source| HistoryFileError::Header { path: path.to_path_buf(), source })?;
                if read.event_version > super::EVENT_VERSION {
                    return Err(HistoryFileError::Newer { path: path.to_path_buf(), version: read.event_version });
                }
                header = Some(read);
            }
            // A stream's events are in the encoding its header says (a stream before any
            // header cannot be: the writer puts the header first).
            _ => sink(header.as_ref().map_or(super::EVENT_VERSION, |h| h.event_version), bytes)?,
        }
    }
    Ok(header)
}

/// A history file read section by section, each length checked against the file's size
/// first: a cut file is named as truncated, with the section, instead of "failed to fill
/// whole buffer", and a corrupt length never allocates more than the file holds.
struct Sections<'a> {
    input: BufReader<std::fs::File>,
    /// Bytes read so far.
    at: u64,
    /// The file's length.
    size: u64,
    path: &'a Path,
}

impl Sections<'_> {
    /// The next `n` bytes; [`HistoryFileError::Truncated`] when the file holds fewer, with
    /// `what(bytes there)` as what was expected.
    fn take(&mut self, n: u64, what: impl FnOnce(u64) -> String) -> Result<Vec<u8>, HistoryFileError> {
        let there = self.size - self.at;
        if n > there {
            return Err(HistoryFileError::Truncated {
                path: self.path.to_path_buf(),
                size: self.size,
                expected: what(there),
            });
        }
        let mut bytes = vec![0u8; n as usize];
        self.read(&mut bytes)?;
        Ok(bytes)
    }

    /// [`HistoryFileError::Truncated`], `expected` naming the section cut short.
    fn truncated(&self, expected: String) -> HistoryFileError {
        HistoryFileError::Truncated { path: self.path.to_path_buf(), size: self.size, expected }
    }

    /// A little-endian u32; `what()` names it when the file ends first.
    fn u32(&mut self, what: impl FnOnce() -> String) -> Result<u32, HistoryFileError> {
        let bytes = self.take(4, |_| what())?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// Everything left in the file (after a section found cut short, to say how far it got).
    fn rest(&mut self) -> Result<Vec<u8>, HistoryFileError> {
        let mut bytes = vec![0u8; (self.size - self.at) as usize];
        self.read(&mut bytes)?;
        Ok(bytes)
    }

    fn read(&mut self, into: &mut [u8]) -> Result<(), HistoryFileError> {
        self.input.read_exact(into).map_err(|source| HistoryFileError::Io { path: self.path.to_path_buf(), source })?;
        self.at += into.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{HistoryBuf, Kind, Outcome};
    use std::time::Instant;

    /// Two streams of `events` progress events each, 5 bytes an event (kind, job delta, token,
    /// send-time delta, duration: one byte each).
    fn streams(events: u32) -> Vec<Vec<u8>> {
        let start = Instant::now();
        (0..2)
            .flat_map(|_| {
                let mut buf = HistoryBuf::new(start);
                for job in 1..=events {
                    buf.push(job, Kind::Progress, Outcome::Ok, 1, None, start, 0);
                }
                buf.take()
            })
            .collect()
    }

    fn header() -> HistoryHeader {
        HistoryHeader::for_tests(10)
    }

    /// The load error of `bytes` written to a file.
    fn load_err(dir: &Path, bytes: &[u8]) -> String {
        let path = dir.join("cut.bin");
        std::fs::write(&path, bytes).unwrap();
        load(&path).expect_err("refused").to_string()
    }

    #[test]
    fn a_saved_history_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.bin");
        save(&path, &header(), &streams(10)).unwrap();
        assert_eq!(load(&path).unwrap(), (header(), streams(10)));
    }

    /// A file cut short says which file, that it is truncated, where it
    /// ends and which section it cut (with the event, inside a stream), not "failed to fill
    /// whole buffer".
    #[test]
    fn a_truncated_file_names_the_section_it_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.bin");
        let streams = streams(10);
        assert!(streams.iter().all(|s| s.len() == 60), "6-byte events");
        save(&path, &header(), &streams).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let json = serde_json::to_vec(&header()).unwrap().len();
        let count_at = 12 + json;
        let stream = |k: usize| count_at + 4 + (k - 1) * 68 + 8; // where stream k's bytes start
        let file = path.with_file_name("cut.bin");
        let f = file.display();
        for (cut, want) in [
            (0, format!("{f}: truncated: the file ends at byte 0, expected the 8-byte magic EMQHIST5 at byte 0 (0 there)")),
            (5, "ends at byte 5, expected the 8-byte magic EMQHIST5 at byte 0 (5 there)".into()),
            (10, "ends at byte 10, expected the header's 4-byte length at byte 8".into()),
            (20, format!("ends at byte 20, expected the header: {json} bytes of JSON from byte 12 (8 there)")),
            (count_at + 2, format!("expected the 4-byte stream count at byte {count_at}")),
            (count_at + 4 + 3, format!("expected the 8-byte length of stream 1 of 2 at byte {}", count_at + 4)),
            (stream(1), format!("expected stream 1 of 2: 60 bytes from byte {} (0 there)", stream(1))),
            (
                stream(2) + 14,
                format!(
                    "expected stream 2 of 2: 60 bytes from byte {} (14 there; the file ends inside its event 3, after 2 whole events)",
                    stream(2)
                ),
            ),
            (stream(2) + 30, "(30 there; the file ends after its event 5)".into()),
            (
                bytes.len() - 1,
                format!("ends at byte {}, expected stream 2 of 2: 60 bytes from byte {} (59 there; the file ends inside its event 10, after 9 whole events)", bytes.len() - 1, stream(2)),
            ),
        ] {
            let err = load_err(dir.path(), &bytes[..cut]);
            assert!(err.starts_with(&format!("{f}: truncated: ")) && err.contains(&want), "cut at {cut}: {err}\nwant: {want}");
        }
        // Not a prefix of the magic: another file, not a truncated history.
        assert!(load_err(dir.path(), b"EMQ").contains("truncated"));
        assert!(load_err(dir.path(), b"PNG").contains("not an emq-bench history"));
        // A length larger than the file is a cut, never an allocation of that size.
        let mut huge = bytes[..count_at + 4].to_vec();
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(load_err(dir.path(), &huge).contains(&format!("stream 1 of 2: {} bytes", u64::MAX)));
    }
}
