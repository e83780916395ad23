//! CRC-64 with the Jones polynomial (reflected, initial value 0, no final
//! xor): the checksum at the end of an RDB file and of a DUMP payload.
//! `crc64(0, b"123456789")` is `0xe9c6d914c4b8d9ca`.

/// The Jones polynomial, bit-reversed for the reflected algorithm.
const POLY: u64 = 0x95ac_9329_ac4b_c9b5;

/// Eight tables for slicing-by-8 (about 1 GB/s on one core).
static TABLES: [[u64; 256]; 8] = build_tables();

const fn build_tables() -> [[u64; 256]; 8] {
    let mut t = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

/// Continues the checksum `crc` over `data`.
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let v = crc ^ u64::from_le_bytes(w);
        crc = TABLES[7][(v & 0xff) as usize]
            ^ TABLES[6][((v >> 8) & 0xff) as usize]
            ^ TABLES[5][((v >> 16) & 0xff) as usize]
            ^ TABLES[4][((v >> 24) & 0xff) as usize]
            ^ TABLES[3][((v >> 32) & 0xff) as usize]
            ^ TABLES[2][((v >> 40) & 0xff) as usize]
            ^ TABLES[1][((v >> 48) & 0xff) as usize]
            ^ TABLES[0][(v >> 56) as usize];
    }
    for &b in chunks.remainder() {
        crc = TABLES[0][((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn incremental_equals_whole() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let whole = crc64(0, &data);
        for cut in [0, 1, 7, 8, 9, 500, 999, 1000] {
            let (a, b) = data.split_at(cut);
            assert_eq!(crc64(crc64(0, a), b), whole);
        }
    }
}
