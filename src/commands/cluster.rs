//! CLUSTER, READONLY, READWRITE and ASKING, answered as a Redis 7.0 started
//! with `cluster-enabled no` answers them: every CLUSTER subcommand (after
//! its arity check) and the three connection commands say that cluster
//! support is disabled. Cluster clients probe with them to find out which
//! mode a server runs in, so the line must be exactly Redis's.

use super::table::{flags::*, CommandSpec, KeySpec};
use super::Ctx;
use crate::error::{CmdError, CmdResult};

/// The error every cluster command answers.
const DISABLED: &str = "This instance has cluster support disabled";

fn disabled(_ctx: &mut Ctx, _a: &[&[u8]]) -> CmdResult {
    Err(CmdError::err(DISABLED))
}

const fn sub(name: &'static str, arity: i32, flags: u32, summary: &'static str) -> CommandSpec {
    CommandSpec {
        group: "cluster",
        summary,
        since: "3.0.0",
        complexity: "O(1)",
        ..CommandSpec::new(name, arity, flags, KeySpec::None, disabled)
    }
}

const ADMIN_STALE: u32 = ADMIN | STALE;

/// CLUSTER's subcommands, with Redis 7.0's arities and flags.
const SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "addslots",
        -3,
        ADMIN_STALE,
        "Assign new hash slots to receiving node",
    ),
    sub(
        "addslotsrange",
        -4,
        ADMIN_STALE,
        "Assign new hash slots to receiving node",
    ),
    sub(
        "bumpepoch",
        2,
        ADMIN_STALE,
        "Advance the cluster config epoch",
    ),
    sub(
        "count-failure-reports",
        3,
        ADMIN_STALE,
        "Return the number of failure reports active for a given node",
    ),
    sub(
        "countkeysinslot",
        3,
        STALE,
        "Return the number of local keys in the specified hash slot",
    ),
    sub(
        "delslots",
        -3,
        ADMIN_STALE,
        "Set hash slots as unbound in receiving node",
    ),
    sub(
        "delslotsrange",
        -4,
        ADMIN_STALE,
        "Set hash slots as unbound in receiving node",
    ),
    sub(
        "failover",
        -2,
        ADMIN_STALE,
        "Forces a replica to perform a manual failover of its master.",
    ),
    sub(
        "flushslots",
        2,
        ADMIN_STALE,
        "Delete a node's own slots information",
    ),
    sub(
        "forget",
        3,
        ADMIN_STALE,
        "Remove a node from the nodes table",
    ),
    sub(
        "getkeysinslot",
        4,
        STALE,
        "Return local key names in the specified hash slot",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Show helpful text about the different subcommands",
    ),
    sub(
        "info",
        2,
        STALE,
        "Provides info about Redis Cluster node state",
    ),
    sub(
        "keyslot",
        3,
        STALE,
        "Returns the hash slot of the specified key",
    ),
    sub(
        "links",
        2,
        STALE,
        "Returns a list of all TCP links to and from peer nodes in cluster",
    ),
    sub(
        "meet",
        -4,
        ADMIN_STALE,
        "Force a node cluster to handshake with another node",
    ),
    sub("myid", 2, STALE, "Return the node id"),
    sub("nodes", 2, STALE, "Get Cluster config for the node"),
    sub(
        "replicas",
        3,
        ADMIN_STALE,
        "List replica nodes of the specified master node",
    ),
    sub(
        "replicate",
        3,
        ADMIN_STALE,
        "Reconfigure a node as a replica of the specified master node",
    ),
    sub(
        "reset",
        -2,
        ADMIN | NOSCRIPT | STALE,
        "Reset a Redis Cluster node",
    ),
    sub(
        "saveconfig",
        2,
        ADMIN_STALE,
        "Forces the node to save cluster state on disk",
    ),
    sub(
        "set-config-epoch",
        3,
        ADMIN_STALE,
        "Set the configuration epoch in a new node",
    ),
    sub(
        "setslot",
        -4,
        ADMIN_STALE,
        "Bind a hash slot to a specific node",
    ),
    sub(
        "shards",
        2,
        STALE,
        "Get array of cluster slots to node mappings",
    ),
    sub(
        "slaves",
        3,
        ADMIN_STALE,
        "List replica nodes of the specified master node",
    ),
    sub(
        "slots",
        2,
        STALE,
        "Get array of Cluster slot to node mappings",
    ),
];

/// Never runs: a container without a subcommand is an arity error.
fn no_subcommand(_ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult {
    Err(CmdError::WrongArity(super::args::text(a[0]).to_lowercase()))
}

const fn conn(name: &'static str, flags: u32, summary: &'static str) -> CommandSpec {
    CommandSpec {
        group: "cluster",
        summary,
        since: "3.0.0",
        complexity: "O(1)",
        ..CommandSpec::new(name, 1, flags, KeySpec::None, disabled)
    }
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        group: "cluster",
        summary: "A container for cluster commands",
        since: "3.0.0",
        complexity: "Depends on subcommand.",
        subcommands: SUBCOMMANDS,
        ..CommandSpec::new("cluster", -2, 0, KeySpec::None, no_subcommand)
    },
    conn(
        "readonly",
        LOADING | STALE | FAST,
        "Enables read queries for a connection to a cluster replica node",
    ),
    conn(
        "readwrite",
        LOADING | STALE | FAST,
        "Disables read queries for a connection to a cluster replica node",
    ),
    conn(
        "asking",
        FAST,
        "Sent by cluster clients after an -ASK redirect",
    ),
];
