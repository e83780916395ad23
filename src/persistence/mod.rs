//! Durability: the append-only file (writer, loader, rewrite). Empty until
//! the AOF lands; the dispatcher's dirty counter is where it will hook in.
