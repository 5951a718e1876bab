//! `history.bin`: the run's history saved in the results folder, so `emq-bench check` can be
//! re-run later. Versioned: magic `EMQHIST2` (2: enqueues keep the id's time part), a JSON header, then the per-thread streams as
//! recorded (the compact varint encoding of `buffer.rs`).
//!
//! Layout: `EMQHIST2` · u32 LE header length · header JSON · u32 LE stream count ·
//! for each stream: u64 LE length · bytes.

use super::HistoryHeader;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// The file's magic and format version.
pub const MAGIC: &[u8; 8] = b"EMQHIST2";

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
    #[error("{}: not an emq-bench history (expected magic EMQHIST2)", path.display())]
    Magic {
        /// The file.
        path: PathBuf,
    },
    /// The header JSON is malformed.
    #[error("{}: bad history header: {source}", path.display())]
    Header {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        source: serde_json::Error,
    },
}

/// Writes `header` and `streams` to `path` (via `path.tmp` and a rename).
pub fn save(path: &Path, header: &HistoryHeader, streams: &[Vec<u8>]) -> Result<(), HistoryFileError> {
    let io = |source| HistoryFileError::Io { path: path.to_path_buf(), source };
    let tmp = path.with_extension("bin.tmp");
    let written = (|| {
        let mut out = BufWriter::new(std::fs::File::create(&tmp).map_err(io)?);
        let json = serde_json::to_vec(header).expect("header serializes");
        out.write_all(MAGIC).map_err(io)?;
        out.write_all(&(json.len() as u32).to_le_bytes()).map_err(io)?;
        out.write_all(&json).map_err(io)?;
        out.write_all(&(streams.len() as u32).to_le_bytes()).map_err(io)?;
        for stream in streams {
            out.write_all(&(stream.len() as u64).to_le_bytes()).map_err(io)?;
            out.write_all(stream).map_err(io)?;
        }
        out.into_inner().map_err(|e| io(e.into_error()))?.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    })();
    // A full disk must not leave a half-written `.tmp` beside the results.
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Reads a history file: its header and raw streams.
///
/// Errors: I/O, a wrong magic (another file or version), or a malformed header.
pub fn load(path: &Path) -> Result<(HistoryHeader, Vec<Vec<u8>>), HistoryFileError> {
    let io = |source| HistoryFileError::Io { path: path.to_path_buf(), source };
    let mut input = BufReader::new(std::fs::File::open(path).map_err(io)?);
    let mut magic = [0u8; 8];
    input.read_exact(&mut magic).map_err(io)?;
    if &magic != MAGIC {
        return Err(HistoryFileError::Magic { path: path.to_path_buf() });
    }
    let mut len4 = [0u8; 4];
    input.read_exact(&mut len4).map_err(io)?;
    let mut json = vec![0u8; u32::from_le_bytes(len4) as usize];
    input.read_exact(&mut json).map_err(io)?;
    let header = serde_json::from_slice(&json)
        .map_err(|source| HistoryFileError::Header { path: path.to_path_buf(), source })?;
    input.read_exact(&mut len4).map_err(io)?;
    let mut streams = Vec::new();
    for _ in 0..u32::from_le_bytes(len4) {
        let mut len8 = [0u8; 8];
        input.read_exact(&mut len8).map_err(io)?;
        let mut stream = vec![0u8; u64::from_le_bytes(len8) as usize];
        input.read_exact(&mut stream).map_err(io)?;
        streams.push(stream);
    }
    Ok((header, streams))
}
