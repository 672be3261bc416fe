// Ctrl-C and SIGTERM during a transfer: stop at the next box and clean up
// (remove the partial array file or dataset) instead of dying with half an
// output behind. A second signal ends the process at once (the default
// action is restored after the first).
#pragma once

namespace mmfs::h5 {

void install_interrupt_handler();
// Throws ToolError(EINTR, "interrupted") once a signal arrived.
void check_interrupted();

}  // namespace mmfs::h5
