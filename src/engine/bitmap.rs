//! Bitmaps: the storage behind SETBIT and friends, compressed while sparse
//! and plain bytes when dense. (Lands with the bitmap issue.)
