//! The SRP driver under the emulated port: each [`Driver`] entry the port calls is handed
//! to the driver's own method (`SrpDriver::on_*`), the port's handle given as the
//! [`IscsiPortCalls`](crate::model::IscsiPortCalls) the driver makes — what a kernel
//! driver's glue does from its IRP handlers.

use super::SrpDriver;
use crate::model::{DriverInfo, InitializeError, PowerState, Request};
use crate::port::{Driver, PortHandle};
use srp_initiator::SrbExt;
use std::sync::Arc;

impl Driver for SrpDriver {
    type Extension = SrbExt;

    fn initialize(&self, port: &PortHandle<Self>) -> Result<DriverInfo, InitializeError> {
        self.on_initialize(Arc::new(port.clone()))
    }

    fn start_request(&self, port: &PortHandle<Self>, request: Request<SrbExt>) {
        self.on_start_request(port, request);
    }

    fn reset(&self, _port: &PortHandle<Self>, path_id: u8) -> bool {
        self.on_reset(path_id)
    }

    fn remove(&self, _port: &PortHandle<Self>, surprise: bool) {
        self.on_remove(surprise);
    }

    fn power(&self, _port: &PortHandle<Self>, state: PowerState) {
        self.on_power(state);
    }

    fn unload(&self, _port: &PortHandle<Self>) {
        self.on_unload();
    }
}
