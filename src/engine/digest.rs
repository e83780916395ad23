//! DEBUG DIGEST and DEBUG DIGEST-VALUE: a SHA-1 signature of values, the
//! same bytes as redis-server 7.0's `computeDatasetDigest` and
//! `xorObjectDigest` (debug.c), so a dataset moved between Rostrum and
//! Redis can be compared by its digest. Ordered types (strings, lists,
//! streams) mix their elements in order; unordered ones (sets, hashes,
//! sorted sets) XOR one digest per element, so the table order does not
//! matter. A leaderboard, a type of Rostrum's own, is digested as a
//! sorted set of its members and scores under type number 7.

use sha1_smol::Sha1;

use super::stream::id::StreamId;
use super::Value;

/// A 20-byte digest.
pub type Digest = [u8; 20];

fn sha1(data: &[u8]) -> Digest {
    let mut h = Sha1::new();
    h.update(data);
    h.digest().bytes()
}

/// Redis's `xorDigest`: `digest ^= SHA1(data)`.
pub fn xor(digest: &mut Digest, data: &[u8]) {
    for (d, h) in digest.iter_mut().zip(sha1(data)) {
        *d ^= h;
    }
}

/// Redis's `mixDigest`: `digest = SHA1(digest ^ SHA1(data))`.
pub fn mix(digest: &mut Digest, data: &[u8]) {
    xor(digest, data);
    *digest = sha1(&digest[..]);
}

/// The type numbers Redis mixes in (`OBJ_STRING` ...).
fn type_number(v: &Value) -> u32 {
    match v {
        Value::Str(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::ZSet(_) => 3,
        Value::Hash(_) => 4,
        Value::Stream(_) => 6,
        Value::Leaderboard(_) => 7,
    }
}

/// A score as Redis's digest writes it (`%.17g`).
fn score_text(score: f64) -> Vec<u8> {
    let mut b = [0u8; crate::protocol::number::MAX_DOUBLE_CHARS];
    let n = crate::protocol::format_double(score, &mut b);
    b[..n].to_vec()
}

/// One pair XORed into `digest` as Redis does for sorted sets and hashes.
fn xor_pair(digest: &mut Digest, a: &[u8], b: &[u8]) {
    let mut e = [0u8; 20];
    mix(&mut e, a);
    mix(&mut e, b);
    xor(digest, &e);
}

/// Mixes a value (and whether it has an expiry) into `digest`
/// (`xorObjectDigest`): DEBUG DIGEST-VALUE starts from zeros, DEBUG
/// DIGEST from the key's own mix.
pub fn mix_value(digest: &mut Digest, v: &Value, has_expiry: bool) {
    mix(digest, &type_number(v).to_be_bytes());
    match v {
        Value::Str(s) => mix(digest, &s.as_bytes()),
        Value::List(l) => {
            for e in l.iter() {
                mix(digest, &e.to_vec());
            }
        }
        Value::Set(s) => {
            for m in s.iter() {
                xor(digest, &m.to_vec());
            }
        }
        Value::ZSet(z) => {
            for (m, score) in z.iter() {
                xor_pair(digest, m, &score_text(score));
            }
        }
        Value::Hash(h) => {
            for (f, v) in h.iter() {
                xor_pair(digest, f, v.as_ref());
            }
        }
        Value::Stream(st) => {
            st.for_each_in(StreamId::MIN, StreamId::MAX, false, |id, fields| {
                mix(digest, format!("{}.{}", id.ms, id.seq).as_bytes());
                for f in fields {
                    mix(digest, f);
                }
                true
            });
        }
        Value::Leaderboard(b) => {
            for (_, e) in b.iter() {
                xor_pair(digest, e.member, e.score.to_string().as_bytes());
            }
        }
    }
    if has_expiry {
        xor(digest, b"!!expire!!");
    }
}

/// The digest of one key and its value, as DEBUG DIGEST XORs it into the
/// dataset's.
pub fn key_digest(key: &[u8], v: &Value, has_expiry: bool) -> Digest {
    let mut d = [0u8; 20];
    mix(&mut d, key);
    mix_value(&mut d, v, has_expiry);
    d
}

/// Hex, as DEBUG prints a digest.
pub fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_digest_is_redis_7_0s() {
        // redis-server 7.0.15: SET s hello; DEBUG DIGEST-VALUE s.
        let v = Value::Str(crate::engine::string::StrValue::from_bytes(b"hello"));
        let mut d = [0u8; 20];
        mix_value(&mut d, &v, false);
        assert_eq!(hex(&d), "36b23a1456b2dce2c3ed252c456761301dba8060");
    }
}
