// `temper flow explore --fd N`: the explorer process's main (flow_spotlight.h): one thread budget, then
// spotlight::explorer_serve over the inherited socket with the flow scorer the setup describes.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "temper/app/flow_spotlight.h"
#include "temper/app/flow_spotlight_setup.h"
#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/spotlight/explorer_loop.h"

namespace temper::app {

int run_flow_explore(int fd, int threads, int nice) {
  TEMPER_CHECK(fd >= 0 && ::fcntl(fd, F_GETFD) >= 0)
      << "temper flow explore: --fd " << fd
      << " is not an open descriptor (explorers are started by temper flow spotlight)";
  if (nice > 0) {  // relative to the trainer's: it keeps the core they share when both want it
    errno = 0;
    if (::nice(nice) == -1 && errno != 0) std::fprintf(stderr, "temper flow explore: nice(%d) failed\n", nice);
  }
  set_num_threads(threads > 0 ? threads : 1);
  return spotlight::explorer_serve(fd, make_explorer_scorer);
}

}  // namespace temper::app
