//! Valkey Cluster key slots: CRC16/XMODEM of the key's hash tag (the bytes between the first
//! `{` and the next `}`, when non-empty; else the whole key) mod 16384, as the cluster
//! specification defines it.

/// Slots in a cluster.
pub const SLOTS: u16 = 16384;

const XMODEM: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);

/// The slot of `key`.
pub fn slot(key: &[u8]) -> u16 {
    XMODEM.checksum(hash_tag(key)) % SLOTS
}

/// The part of `key` that is hashed.
fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_the_cluster_specification() {
        // Reference values of the cluster spec and of CLUSTER KEYSLOT.
        assert_eq!(slot(b"123456789"), 0x31C3 % SLOTS);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"emq:{foo}:pending"), slot(b"foo"));
        assert_eq!(slot(b"emq-lock:{foo}"), slot(b"foo"));
        assert_eq!(slot(b"a{}b"), slot(b"a{}b"), "an empty tag hashes the whole key");
        assert_ne!(slot(b"a{}b"), slot(b""));
    }
}
