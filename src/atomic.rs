//! One way to write a results file: into `<path>.tmp`, flushed, synced and renamed, so a reader
//! never sees half a file and a failed write (a full disk) leaves no `.tmp` behind. Every
//! writer of a results folder (the report's files and `history.bin`) goes through [`write`].

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// `<path>.tmp`, the name a file has while it is written.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    PathBuf::from(tmp)
}

/// Writes `path` atomically: `body` writes into [`tmp_path`], which is then flushed, synced and
/// renamed onto `path`. `io` turns an I/O error into the caller's error type (naming `path`);
/// `body`'s own errors are returned as they are. On any error the `.tmp` file is removed.
pub fn write<E, F>(path: &Path, io: impl Fn(std::io::Error) -> E, body: F) -> Result<(), E>
where
    F: FnOnce(&mut BufWriter<File>) -> Result<(), E>,
{
    let tmp = tmp_path(path);
    let written = (|| {
        let mut w = BufWriter::new(File::create(&tmp).map_err(&io)?);
        body(&mut w)?;
        w.flush().map_err(&io)?;
        w.get_ref().sync_all().map_err(&io)?;
        drop(w);
        fs::rename(&tmp, path).map_err(&io)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}
