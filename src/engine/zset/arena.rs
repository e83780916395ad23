//! A growable array stored in fixed-size chunks, for the skiplist's nodes:
//! growing never copies the elements, and the unused room is at most the
//! tail of one chunk (a `Vec` grown by size classes wastes up to a fifth of
//! a big set's nodes).

use std::ops::{Index, IndexMut};

use super::alloc_size;

/// Bytes in a full chunk (a jemalloc size class, so a full chunk wastes
/// less than one element).
const CHUNK_BYTES: usize = 1 << 20;

/// An array of `T` in chunks of `CHUNK_BYTES / size_of::<T>()` elements.
#[derive(Debug, Clone)]
pub(crate) struct ChunkedVec<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> ChunkedVec<T> {
    /// Elements in a full chunk.
    const PER_CHUNK: usize = CHUNK_BYTES / std::mem::size_of::<T>();

    /// An empty array.
    pub fn new() -> ChunkedVec<T> {
        ChunkedVec {
            chunks: Vec::new(),
            len: 0,
        }
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Appends `value`; the last chunk grows by size classes until full.
    pub fn push(&mut self, value: T) {
        self.push_growing_from(value, 8);
    }

    /// [`ChunkedVec::push`], with room for at least `min` elements once
    /// the first chunk is allocated (a small first chunk for big elements).
    pub fn push_growing_from(&mut self, value: T, min: usize) {
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.len() < Self::PER_CHUNK);
        if !fits {
            self.chunks.push(Vec::new());
        }
        if let Some(c) = self.chunks.last_mut() {
            if c.len() == c.capacity() {
                let size = std::mem::size_of::<T>().max(1);
                let want = (c.capacity() + c.capacity() / 8).max(c.len() + 1).max(min);
                let cap = (alloc_size(want * size) / size).min(Self::PER_CHUNK);
                c.reserve_exact(cap - c.len());
            }
            c.push(value);
            self.len += 1;
        }
    }

    /// Bytes allocated, rounded to the allocator's size classes.
    pub fn allocated(&self) -> usize {
        alloc_size(self.chunks.capacity() * std::mem::size_of::<Vec<T>>())
            + self
                .chunks
                .iter()
                .map(|c| alloc_size(c.capacity() * std::mem::size_of::<T>()))
                .sum::<usize>()
    }
}

impl<T> Index<usize> for ChunkedVec<T> {
    type Output = T;

    #[inline]
    fn index(&self, i: usize) -> &T {
        &self.chunks[i / Self::PER_CHUNK][i % Self::PER_CHUNK]
    }
}

impl<T> IndexMut<usize> for ChunkedVec<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i / Self::PER_CHUNK][i % Self::PER_CHUNK]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_across_chunks() {
        let mut v = ChunkedVec::<[u8; 36]>::new();
        let n = 3 * ChunkedVec::<[u8; 36]>::PER_CHUNK + 5;
        for i in 0..n {
            v.push([(i % 251) as u8; 36]);
        }
        assert_eq!(v.len(), n);
        for i in (0..n).step_by(97) {
            assert_eq!(v[i][0], (i % 251) as u8);
        }
        v[n - 1][0] = 7;
        assert_eq!(v[n - 1][0], 7);
        // At most one partly used chunk.
        assert!(v.allocated() < n * 36 + CHUNK_BYTES / 4 + 4096);
    }
}
