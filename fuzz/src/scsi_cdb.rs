//! Any bytes as a CDB: parsing never panics; a rejected CDB always maps to sense data; and
//! whatever parses re-emits to bytes that parse to the same command.
use scsi::cdb::{Command, OPCODES, rsoc};
use wirekit::WireRepr;

/// One input.
pub fn run(data: &[u8]) {
    match Command::parse(data) {
        Ok(cmd) => {
            let mut buf = vec![0u8; cmd.buffer_len()];
            let n = cmd.emit(&mut buf).expect("a parsed command must emit");
            assert_eq!(n, buf.len());
            assert_eq!(
                Command::parse(&buf[..n]),
                Ok(cmd),
                "emitted CDB must parse to the same command"
            );
            if let Command::ReportSupportedOpcodes(req) = cmd {
                let _ = rsoc::one_command(OPCODES, &req, rsoc::no_timeouts);
            }
        }
        Err(e) => {
            assert!(
                e.sense().is_some(),
                "a parse error must name its sense data: {e:?}"
            );
        }
    }
}
