//! Any bytes as sense data (either format, and each format alone): parsing never panics,
//! and whatever parses re-emits to bytes that parse to the same value.
use crate::round_trip::round_trip;

use scsi::sense::{DescriptorSense, FixedSense, Sense};
use wirekit::WireRepr;

/// One input.
pub fn run(data: &[u8]) {
    if let Ok(sense) = Sense::parse(data) {
        round_trip(&sense, &mut Vec::new());
        // The fixed-to-descriptor conversion must produce emittable sense data too.
        let _ = sense.code().description();
        let desc = sense.to_descriptor();
        if desc.buffer_len() <= 8 + 255 {
            round_trip(&desc, &mut Vec::new());
        }
    }
    if let Ok(fixed) = FixedSense::parse(data) {
        round_trip(&fixed, &mut Vec::new());
    }
    if let Ok(desc) = DescriptorSense::parse(data) {
        round_trip(&desc, &mut Vec::new());
    }
}
