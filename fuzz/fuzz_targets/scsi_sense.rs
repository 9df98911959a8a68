//! Any bytes as sense data (either format, and each format alone): parsing never panics,
//! and whatever parses re-emits to bytes that parse to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scsi::sense::{DescriptorSense, FixedSense, Sense};
use wirekit::WireRepr;

fn round_trip<'a, T: WireRepr<'a> + PartialEq + core::fmt::Debug>(v: &T, buf: &'a mut Vec<u8>) {
    buf.resize(v.buffer_len(), 0);
    let n = v.emit(buf).expect("parsed sense data must emit");
    let buf: &'a Vec<u8> = buf;
    let back = T::parse(&buf[..n]).expect("emitted sense data must parse");
    assert_eq!(&back, v);
}

fuzz_target!(|data: &[u8]| {
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
});
