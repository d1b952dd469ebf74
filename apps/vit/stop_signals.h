// SIGINT (Ctrl-C), SIGTERM (what a batch scheduler or `docker stop` sends before it kills a
// job) and SIGHUP (the terminal or ssh session closed) during vit train: the first asks the run to stop after
// the step it is in, with a recovery state that --resume continues from exactly. A second SIGINT ends the
// program at once (the files are written atomically, so that loses at most the step); a second SIGTERM
// changes nothing (schedulers may send it twice; SIGKILL is the way to stop at once), nor does
// a second SIGHUP.
// Signals the shell had set to be ignored (a background job of a script, nohup) stay ignored.
#pragma once

namespace vit::app {

// Installs the handlers (once; `quiet`: print nothing when a signal arrives, as on MPI ranks
// other than 0).
void catch_stop_signals(bool quiet);
// For the commands other than train and serve, which end at SIGINT, SIGTERM or SIGHUP: the
// temporaries of the files being written are removed first (remove_live_temporaries), then
// the signal takes its default action. Ignored signals stay ignored.
void remove_temporaries_on_stop_signals();
// The signal that asked to stop, or 0.
int stop_signal();
// "SIGINT", "SIGTERM", "SIGHUP", "a signal to another rank" (0: another MPI rank was asked), or "a stop
// request".
const char* stop_signal_name(int sig);

}  // namespace vit::app
