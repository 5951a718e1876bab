//! A finished interval histogram kept in HdrHistogram's V2 encoding, to bound memory per second.

use hdrhistogram::serialization::{DeserializeError, Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;

use super::{growable, new_histogram};

/// One histogram stored as its V2-encoded bytes (HdrHistogram's portable format, uncompressed).
///
/// Why: a live histogram holds thousands of counters (16-139 KB) whatever it contains; a second
/// of one script's latencies encodes to a few hundred bytes. The per-second series of a long run
/// keeps one of these per script per second, and only the hlog writer decodes them again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactHistogram {
    bytes: Vec<u8>,
}

impl CompactHistogram {
    /// Encode `h` (V2, no deflate: encoding is on the reporter, once per script per second).
    pub fn encode(h: &Histogram<u64>) -> CompactHistogram {
        let mut bytes = Vec::new();
        // Writing into a Vec cannot fail with I/O, and a u64 count only fails past i64::MAX.
        V2Serializer::new()
            .serialize(h, &mut bytes)
            .expect("V2 encoding into a Vec of a histogram with counts below i64::MAX");
        CompactHistogram { bytes }
    }

    /// Decode back into a full histogram with the same counts (an empty histogram for the empty
    /// encoding that [`Default`] gives, used when an interval had no ok call).
    ///
    /// # Errors
    /// [`DeserializeError`] only if the bytes were corrupted (they are produced by `encode`).
    pub fn decode(&self) -> Result<Histogram<u64>, DeserializeError> {
        if self.bytes.is_empty() {
            return Ok(new_histogram());
        }
        Deserializer::new().deserialize(&mut &self.bytes[..]).map(growable)
    }

    /// Size of the encoding, bytes.
    pub fn encoded_len(&self) -> usize {
        self.bytes.len()
    }
}
