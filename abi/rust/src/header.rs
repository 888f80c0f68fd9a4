//! The event header (abi/ABI.md section 8).

use crate::Error;
use std::fmt;

/// The event type, header byte 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// The header of an `ih_synced` call.
    None,
    Add,
    Update,
    Delete,
    /// The header of an `ih_reconcile` call (v1.5, section 18): the
    /// strings describe the primary's key.
    Reconcile,
    Other(u8),
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            EventType::None => f.write_str("none"),
            EventType::Add => f.write_str("add"),
            EventType::Update => f.write_str("update"),
            EventType::Delete => f.write_str("delete"),
            EventType::Reconcile => f.write_str("reconcile"),
            EventType::Other(n) => write!(f, "type {}", n),
        }
    }
}

/// A parsed header: the strings are located through their descriptors,
/// and descriptors past the nine of v1 are ignored (a later v1 host may
/// append some).
#[derive(Clone, Debug)]
pub struct Header {
    bytes: Vec<u8>,
    strings: [(u32, u32); 9],
}

pub const FLAG_INITIAL_LIST: u8 = 0x01;
pub const FLAG_FINAL_STATE_UNKNOWN: u8 = 0x02;
pub const FLAG_HAS_OLD_OBJECT: u8 = 0x04;
/// The object is the result of one of this plugin's own writes (v1.2).
pub const FLAG_SELF_WRITE: u8 = 0x08;
/// A delete that says the object moved to another replica (v1.2).
pub const FLAG_HANDED_OVER: u8 = 0x10;
/// A delete the host inferred after the fact (v1.5): the object is a stub.
pub const FLAG_MISSED_DELETE: u8 = 0x20;
/// A reconcile of a key with no object in the cache (v1.5).
pub const FLAG_ABSENT: u8 = 0x40;
/// A reconcile of an object whose deletionTimestamp is set (v1.5).
pub const FLAG_DELETING: u8 = 0x80;

impl Header {
    /// Checks the header: version 1, at least 9 descriptors, each inside the
    /// header and UTF-8. `Error::INVALID` otherwise.
    pub fn parse(bytes: Vec<u8>) -> Result<Header, Error> {
        if bytes.len() < 80 || bytes[0] != 1 || bytes[3] < 9 {
            return Err(Error::INVALID);
        }
        let u32at = |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        let n = bytes[3] as usize;
        if 8 + 8 * n > bytes.len() {
            return Err(Error::INVALID);
        }
        let mut strings = [(0u32, 0u32); 9];
        for (i, s) in strings.iter_mut().enumerate() {
            let (off, len) = (u32at(8 + 8 * i), u32at(12 + 8 * i));
            let end = off as u64 + len as u64;
            if end > bytes.len() as u64 || std::str::from_utf8(&bytes[off as usize..end as usize]).is_err() {
                return Err(Error::INVALID);
            }
            *s = (off, len);
        }
        Ok(Header { bytes, strings })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    pub fn version(&self) -> u8 {
        self.bytes[0]
    }
    pub fn event_type(&self) -> EventType {
        match self.bytes[1] {
            0 => EventType::None,
            1 => EventType::Add,
            2 => EventType::Update,
            3 => EventType::Delete,
            4 => EventType::Reconcile,
            n => EventType::Other(n),
        }
    }
    pub fn flags(&self) -> u8 {
        self.bytes[2]
    }
    /// An add of the initial list (or of the replay after a restart).
    pub fn initial_list(&self) -> bool {
        self.flags() & FLAG_INITIAL_LIST != 0
    }
    /// A delete the watch missed: the object is the last state seen.
    pub fn final_state_unknown(&self) -> bool {
        self.flags() & FLAG_FINAL_STATE_UNKNOWN != 0
    }
    pub fn has_old_object(&self) -> bool {
        self.flags() & FLAG_HAS_OLD_OBJECT != 0
    }
    /// The object is the result of one of this plugin's own writes: a
    /// controller answering it would be answering itself (section 17.1).
    pub fn self_write(&self) -> bool {
        self.flags() & FLAG_SELF_WRITE != 0
    }
    /// A delete that says the object moved to another replica of a
    /// sharding group, not out of the cluster (section 4.3).
    pub fn handed_over(&self) -> bool {
        self.flags() & FLAG_HANDED_OVER != 0
    }
    /// A delete the host inferred after the fact (v1.5, section 18): the
    /// object is a stub of apiVersion, kind, namespace, name and uid.
    pub fn missed_delete(&self) -> bool {
        self.flags() & FLAG_MISSED_DELETE != 0
    }
    /// A reconcile of a key with no object in the cache (v1.5).
    pub fn absent(&self) -> bool {
        self.flags() & FLAG_ABSENT != 0
    }
    /// A reconcile of an object being deleted (v1.5).
    pub fn deleting(&self) -> bool {
        self.flags() & FLAG_DELETING != 0
    }
    /// String `i` (0..9) of section 8; "" for an unknown index.
    pub fn string(&self, i: usize) -> &str {
        match self.strings.get(i) {
            // Checked to be UTF-8 inside the header by parse.
            Some(&(off, len)) => std::str::from_utf8(&self.bytes[off as usize..(off + len) as usize]).unwrap_or(""),
            None => "",
        }
    }
    /// The resource's name in the host's configuration (as in bindings).
    pub fn resource_name(&self) -> &str {
        self.string(0)
    }
    pub fn group(&self) -> &str {
        self.string(1)
    }
    pub fn api_version(&self) -> &str {
        self.string(2)
    }
    pub fn resource(&self) -> &str {
        self.string(3)
    }
    pub fn kind(&self) -> &str {
        self.string(4)
    }
    pub fn namespace(&self) -> &str {
        self.string(5)
    }
    pub fn name(&self) -> &str {
        self.string(6)
    }
    pub fn uid(&self) -> &str {
        self.string(7)
    }
    pub fn resource_version(&self) -> &str {
        self.string(8)
    }
    /// `namespace/name`, or `name` for a cluster-scoped object.
    pub fn key(&self) -> String {
        if self.namespace().is_empty() {
            self.name().to_string()
        } else {
            format!("{}/{}", self.namespace(), self.name())
        }
    }

    /// Lays out a v1 header (section 8) of `strings`: what the host sends.
    /// For tests and the fake host.
    pub fn build(event_type: u8, flags: u8, strings: [&str; 9]) -> Vec<u8> {
        let total: usize = 80 + strings.iter().map(|s| s.len()).sum::<usize>();
        let mut b = vec![1, event_type, flags, 9];
        b.extend_from_slice(&(total as u32).to_le_bytes());
        let mut off = 80u32;
        for s in strings.iter() {
            b.extend_from_slice(&off.to_le_bytes());
            b.extend_from_slice(&(s.len() as u32).to_le_bytes());
            off += s.len() as u32;
        }
        for s in strings.iter() {
            b.extend_from_slice(s.as_bytes());
        }
        b
    }
}
