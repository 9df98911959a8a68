//! `srpctl decode`: bytes in, the parsed message out (or the parser's exact complaint).

use anyhow::{Context, Result};
use clap::ValueEnum;
use wirekit::WireRepr;

/// What the bytes given to `decode` are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Kind {
    /// Any SRP information unit (IB CM form of the login IUs).
    Iu,
    /// The 56-byte SRP_LOGIN_REQ Linux ib_srp sends after the RDMA-CM header.
    LoginRdma,
    /// A SCSI CDB.
    Cdb,
    /// SCSI sense data (fixed or descriptor format).
    Sense,
    /// A 256-byte MAD (CM, SA, DM).
    Mad,
}

/// Decodes `bytes` as `kind` and renders the result.
pub(crate) fn decode(kind: Kind, bytes: &[u8], imm_offset: u16) -> Result<String> {
    let body = match kind {
        Kind::Iu => match bytes.first() {
            Some(&code) if srp::wire::IuType::from(code) == srp::wire::IuType::Cmd => {
                let cmd = srp::wire::cmd::Cmd::parse_with(bytes, imm_offset)
                    .context("not a valid SRP_CMD")?;
                let cdb: Vec<u8> = cmd.cdb_bytes().collect();
                let scsi = match scsi::Command::parse(&cdb) {
                    Ok(c) => format!("{c:#?}"),
                    Err(e) => format!("not a CDB this target serves: {e}"),
                };
                format!("{cmd:#?}\nCDB {}\n{scsi}", crate::hex::dump(&cdb).trim())
            }
            _ => format!(
                "{:#?}",
                srp::wire::AnyIu::parse(bytes).context("not a valid SRP IU")?
            ),
        },
        Kind::LoginRdma => format!(
            "{:#?}",
            srp::wire::login::LoginReq::parse_rdma_cm(bytes)
                .context("not a valid RDMA-CM SRP_LOGIN_REQ")?
        ),
        Kind::Cdb => format!(
            "{:#?}",
            scsi::Command::parse(bytes).context("not a valid CDB")?
        ),
        Kind::Sense => format!(
            "{:#?}",
            scsi::Sense::parse(bytes).context("not valid sense data")?
        ),
        Kind::Mad => {
            format!(
                "{:#?}",
                access_layer::mad::parse_any(bytes).context("not a valid MAD")?
            )
        }
    };
    Ok(format!("{} bytes\n{body}\n", bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_an_iu_and_explains_a_bad_one() {
        let cred_rsp = [0x41, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];
        let text = decode(Kind::Iu, &cred_rsp, 68).expect("valid");
        assert!(text.contains("CredRsp"), "{text}");
        let err = decode(Kind::Iu, &cred_rsp[..10], 68).expect_err("truncated");
        assert!(
            format!("{err:#}").contains("need 16 bytes, have 10"),
            "{err:#}"
        );
    }

    #[test]
    fn decodes_a_cdb() {
        let read10 = [0x28, 0, 0, 0, 0x10, 0, 0, 0, 0x08, 0];
        let text = decode(Kind::Cdb, &read10, 68).expect("valid READ(10)");
        assert!(
            text.contains("4096") || text.contains("0x1000") || text.contains("Read"),
            "{text}"
        );
    }
}
