/* emu_fibers.cpp — the fibers of emu_fibers.h. */
#include "emu_fibers.h"

#include <cstdio>
#include <cstdlib>
#include <sys/mman.h>
#include <ucontext.h>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define AT_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AT_EMU_ASAN 1
#endif
#endif
#ifdef AT_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace at_emu
{

namespace
{

/* Room for a kernel's locals and the MMA models' operands (tens of KB), many times over under
 * AddressSanitizer; mapped once, touched on demand, a guard page below. */
const size_t stack_bytes = 1u << 20;

struct fiber {
    ucontext_t ctx;
    void *stack;
    bool done;
    void *fake_stack; /* AddressSanitizer's, while the fiber is switched out */
};

struct scheduler {
    std::vector<fiber> fibers; /* stacks kept from launch to launch */
    const std::function<void(int)> *body = nullptr;
    int current = -1;
    bool progress = false;
    ucontext_t ctx;
    const void *stack = nullptr; /* AddressSanitizer: the calling thread's stack */
    size_t stack_size = 0;
};
thread_local scheduler sched;

/* AddressSanitizer must know which stack is in use, else it reports the switches; with these
 * calls its one warning that it "doesn't fully support makecontext/swapcontext" is moot. */
void switch_begin([[maybe_unused]] void **fake_stack, [[maybe_unused]] const void *bottom,
                  [[maybe_unused]] size_t size)
{
#ifdef AT_EMU_ASAN
    __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#endif
}
void switch_end([[maybe_unused]] void *fake_stack, [[maybe_unused]] const void **bottom,
                [[maybe_unused]] size_t *size)
{
#ifdef AT_EMU_ASAN
    __sanitizer_finish_switch_fiber(fake_stack, bottom, size);
#endif
}

void fiber_main()
{
    scheduler &s = sched;
    switch_end(nullptr, &s.stack, &s.stack_size);
    (*s.body)(s.current);
    s.fibers[(size_t)s.current].done = true;
    s.progress = true;
    switch_begin(nullptr, s.stack, s.stack_size); /* this fiber's stack is done with */
    setcontext(&s.ctx);
}

} // namespace

bool run_fibers(int n, const std::function<void(int)> &body, bool reverse,
                const std::function<void(int, bool)> &switched)
{
    scheduler &s = sched;
    if (s.body) {
        fprintf(stderr, "emulator: a launch inside a launch\n");
        abort();
    }
    while (s.fibers.size() < (size_t)n) {
        void *p = mmap(nullptr, stack_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED || mprotect(p, 4096, PROT_NONE) != 0) {
            fprintf(stderr, "emulator: no memory for a thread's stack\n");
            abort();
        }
        s.fibers.push_back(fiber{{}, p, true, nullptr});
    }
    for (int i = 0; i < n; i++) {
        fiber &f = s.fibers[(size_t)i];
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = stack_bytes;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, fiber_main, 0);
        /* uc_stack is makecontext's alone; without it AddressSanitizer's swapcontext does not
         * clear the shadow of the whole stack at every switch (the annotations below tell it
         * which stack runs). A fiber abandoned in a deadlock left its frames poisoned. */
        f.ctx.uc_stack.ss_sp = nullptr;
        f.ctx.uc_stack.ss_size = 0;
#ifdef AT_EMU_ASAN
        if (!f.done) ASAN_UNPOISON_MEMORY_REGION(f.stack, stack_bytes);
#endif
        f.done = false;
        f.fake_stack = nullptr;
    }
    s.body = &body;
    bool ok = true;
    for (bool live = true; live && ok;) {
        live = false;
        s.progress = false;
        for (int j = 0; j < n; j++) {
            const int i = reverse ? n - 1 - j : j;
            fiber &f = s.fibers[(size_t)i];
            if (f.done) continue;
            live = true;
            s.current = i;
            switched(i, true);
            void *fake = nullptr;
            switch_begin(&fake, f.stack, stack_bytes);
            swapcontext(&s.ctx, &f.ctx);
            switch_end(fake, nullptr, nullptr);
            switched(i, false);
        }
        ok = !live || s.progress;
    }
    s.current = -1;
    s.body = nullptr;
    return ok;
}

void yield()
{
    scheduler &s = sched;
    if (s.current < 0) {
        fprintf(stderr, "emulator: a wait outside a launch's threads\n");
        abort();
    }
    fiber &f = s.fibers[(size_t)s.current];
    switch_begin(&f.fake_stack, s.stack, s.stack_size);
    swapcontext(&f.ctx, &s.ctx);
    switch_end(f.fake_stack, &s.stack, &s.stack_size);
}

void note_progress() { sched.progress = true; }

void barrier::arrive_and_wait()
{
    const unsigned long gen = gen_;
    note_progress();
    if (++arrived_ == n_) {
        arrived_ = 0;
        gen_++;
        return;
    }
    while (gen_ == gen) yield();
}

} // namespace at_emu
