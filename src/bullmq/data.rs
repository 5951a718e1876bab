//! The job's `data` field under the BullMQ protocol: a JSON string literal holding the standard
//! padded base64 of the emq-bench payload bytes (`"` + base64 + `"`).
//!
//! Why: BullMQ's scripts store `data` verbatim, but its official clients `json.loads` /
//! `JSON.parse` it (`job.py` `Job.fromJSON`, docs/bullmq-mapping.md section 5), and a payload
//! is arbitrary bytes. A JSON string of base64 is what the official Python client writes for
//! `Queue.add(name, base64_text)` (`json.dumps`, compact), and the base64 alphabet needs no
//! JSON escape, so encoding is one pass with no escaping and decoding needs no JSON parser.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// The length of [`encode_data`]'s output for a payload of `payload_len` bytes: two quotes
/// and the padded base64 (4 characters per started 3 bytes).
pub fn encoded_len(payload_len: usize) -> usize {
    2 + payload_len.div_ceil(3) * 4
}

/// Appends the `data` field for `payload` to `out`: `"`, the standard padded base64 of the
/// bytes, `"` ([`encoded_len`] bytes in all). Grows `out` at most once; no other allocation.
pub fn encode_data(payload: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + encoded_len(payload.len()), b'"');
    let written = STANDARD
        .encode_slice(payload, &mut out[start + 1..start + 1 + (encoded_len(payload.len()) - 2)])
        .expect("the slice is sized by encoded_len");
    debug_assert_eq!(written, encoded_len(payload.len()) - 2);
}

/// The payload bytes of a `data` field written by [`encode_data`] (or by any BullMQ client
/// given the base64 text as the job's data): `None` when the field is not a JSON string
/// literal of standard padded base64 (no escapes, no white space).
pub fn decode_data(field: &[u8]) -> Option<Vec<u8>> {
    let inner = field.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    STANDARD.decode(inner).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_round_trips_and_matches_the_json_of_the_base64() {
        for len in [0usize, 1, 2, 3, 4, 20, 1000] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 37 % 256) as u8).collect();
            let mut out = b"prefix".to_vec();
            encode_data(&payload, &mut out);
            let field = &out[6..];
            assert_eq!(field.len(), encoded_len(len));
            // What the official client stores for Queue.add(name, base64): json.dumps of the text.
            assert_eq!(field, format!("\"{}\"", STANDARD.encode(&payload)).as_bytes());
            assert_eq!(decode_data(field).as_deref(), Some(&payload[..]));
        }
    }

    #[test]
    fn other_fields_do_not_decode() {
        for field in [&b""[..], b"\"", b"{\"a\":1}", b"\"not base64!\"", b"\"QUJD\"x", b"QUJD", b"\"QUI\""] {
            assert_eq!(decode_data(field), None, "{:?}", String::from_utf8_lossy(field));
        }
    }
}
