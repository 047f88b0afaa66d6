/* emu_fibers.h — the threads of an emulated launch (tests/unit/mma_emu, tests/unit/wgmma_emu):
 * each CUDA thread is a fiber (ucontext) on the calling OS thread, and a round-robin scheduler
 * runs each one until it waits. The result does not depend on how loaded the machine is, a
 * deadlock is reported instead of waited for, and hundreds of threads meeting at barriers cost
 * a user-space switch each, not a trip through the kernel's scheduler (with one OS thread per
 * CUDA thread, that was most of the wgmma emulator's time on two cores). */
#ifndef AT_EMU_FIBERS_H
#define AT_EMU_FIBERS_H

#include <functional>

namespace at_emu
{

/* Runs body(0) .. body(n - 1) as fibers, round robin (from n - 1 down when `reverse`: a thread
 * that uses what thread 0 sets up before a barrier then runs first), each until it waits.
 * switched(i, true) is called just before fiber i runs and switched(i, false) just after it
 * stops, for the emulator's per-thread state. Returns false on a deadlock, a full round in which
 * every fiber only waited (nothing arrived, nothing ended); the fibers are then abandoned. */
bool run_fibers(int n, const std::function<void(int)> &body, bool reverse,
                const std::function<void(int, bool)> &switched);

/* A waiting fiber gives the next one its turn. */
void yield();

/* Something a waiting fiber may be waiting for happened (an arrival, a copy that landed). */
void note_progress();

/* A barrier of n fibers: the last to arrive starts the next generation. */
class barrier
{
  public:
    explicit barrier(int n = 0) : n_(n) {}
    void arrive_and_wait();

  private:
    int n_, arrived_ = 0;
    unsigned long gen_ = 0;
};

} // namespace at_emu

#endif
