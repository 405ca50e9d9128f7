/* An AVX2 CPU as every library in a process sees it: CPUID with AVX-512 and AMX masked.

   Built and preloaded by benchmarks/emulate_isa.py (LD_PRELOAD); see its docstring for when and why.

   Libraries choose their kernels from the CPUID instruction's feature bits (oneDNN, XLA's LLVM and its
   YNNPACK, PyTorch's cpuinfo and inductor, MKL, OpenBLAS, numpy). Linux can make CPUID fault in a
   process on CPUs that can trap it (`cpuid_fault` in /proc/cpuinfo's flags): arch_prctl(ARCH_SET_CPUID,
   0). This library turns that on when it loads, and its SIGSEGV handler answers each trapped CPUID
   with the real values, AVX-512's, AMX's and AVX10's bits cleared, then steps over the instruction. The
   setting is kept by every thread and child process; an exec'd program gets it again from LD_PRELOAD.

   Every other SIGSEGV goes to the handler the program installed, or to the default action: the
   library keeps its own handler first by answering the program's sigaction() and signal() for SIGSEGV
   itself. glibc reads CPUID before any preloaded library can load, so its string functions are capped
   by GLIBC_TUNABLES instead (emulate_isa.py sets both). */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define BIT(n) (1u << (n))

/* Leaf 7, subleaf 0: AVX512F, DQ, IFMA, PF, ER, CD, BW, VL (EBX); VBMI, VBMI2, VNNI, BITALG,
   VPOPCNTDQ (ECX); 4VNNIW, 4FMAPS, VP2INTERSECT, AMX-BF16, FP16, AMX-TILE, AMX-INT8 (EDX). */
static const uint32_t LEAF7_EBX = BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31);
static const uint32_t LEAF7_ECX = BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14);
static const uint32_t LEAF7_EDX = BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) | BIT(24) | BIT(25);
/* Leaf 7, subleaf 1: AVX512_BF16, AMX-FP16 (EAX); AVX10 (EDX). */
static const uint32_t LEAF7_1_EAX = BIT(5) | BIT(21);
static const uint32_t LEAF7_1_EDX = BIT(19);

static struct sigaction program_action;  /* the program's SIGSEGV handler: every fault but CPUID's */
static int (*libc_sigaction)(int, const struct sigaction *, struct sigaction *);

static void cpuid(uint32_t leaf, uint32_t subleaf, uint32_t out[4]) {
    __asm__ volatile("cpuid" : "=a"(out[0]), "=b"(out[1]), "=c"(out[2]), "=d"(out[3]) : "a"(leaf), "c"(subleaf));
}

static void answer_cpuid(int signal, siginfo_t *info, void *context) {
    ucontext_t *uc = context;
    greg_t *registers = uc->uc_mcontext.gregs;
    const unsigned char *instruction = (const unsigned char *)registers[REG_RIP];
    /* A trapped CPUID arrives as a general-protection fault (SI_KERNEL) at the instruction 0F A2. */
    if (info->si_code != SI_KERNEL || instruction[0] != 0x0f || instruction[1] != 0xa2) {  /* the program's */
        if (program_action.sa_flags & SA_SIGINFO) {
            program_action.sa_sigaction(signal, info, context);
        } else if (program_action.sa_handler != SIG_DFL && program_action.sa_handler != SIG_IGN) {
            program_action.sa_handler(signal);
        } else {  /* the default action: a faulting instruction faults again, now fatally; a sent signal is sent again */
            struct sigaction fallback = {.sa_handler = SIG_DFL};
            libc_sigaction(SIGSEGV, &fallback, NULL);
            if (info->si_code <= 0) raise(signal);
        }
        return;
    }
    int saved_errno = errno;
    uint32_t leaf = (uint32_t)registers[REG_RAX], subleaf = (uint32_t)registers[REG_RCX], out[4];
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);  /* this thread only, for the one real CPUID */
    cpuid(leaf, subleaf, out);
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
    if (leaf == 7 && subleaf == 0) {
        out[1] &= ~LEAF7_EBX;
        out[2] &= ~LEAF7_ECX;
        out[3] &= ~LEAF7_EDX;
    } else if (leaf == 7 && subleaf == 1) {
        out[0] &= ~LEAF7_1_EAX;
        out[3] &= ~LEAF7_1_EDX;
    } else if (leaf == 0x24) {  /* AVX10's own leaf */
        out[0] = out[1] = out[2] = out[3] = 0;
    }
    registers[REG_RAX] = out[0];
    registers[REG_RBX] = out[1];
    registers[REG_RCX] = out[2];
    registers[REG_RDX] = out[3];
    registers[REG_RIP] += 2;
    errno = saved_errno;
}

/* The program's sigaction for SIGSEGV is recorded, not installed: this library's handler stays first. */
int sigaction(int signal, const struct sigaction *action, struct sigaction *old) {
    if (!libc_sigaction) libc_sigaction = dlsym(RTLD_NEXT, "sigaction");
    if (signal != SIGSEGV) return libc_sigaction(signal, action, old);
    if (old) *old = program_action;
    if (action) program_action = *action;
    return 0;
}

sighandler_t signal(int signal, sighandler_t handler) {
    struct sigaction action = {.sa_handler = handler}, old;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    return sigaction(signal, &action, &old) == 0 ? old.sa_handler : SIG_ERR;
}

__attribute__((constructor)) static void mask_cpuid(void) {
    libc_sigaction = dlsym(RTLD_NEXT, "sigaction");
    program_action.sa_handler = SIG_DFL;
    struct sigaction ours = {.sa_sigaction = answer_cpuid, .sa_flags = SA_SIGINFO | SA_NODEFER};
    sigemptyset(&ours.sa_mask);
    if (libc_sigaction(SIGSEGV, &ours, NULL) != 0 || syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0) != 0) {
        static const char refusal[] = "cpuid_avx2: this CPU or kernel cannot trap CPUID (no cpuid_fault); "
                                      "the process runs with the real CPUID\n";
        if (write(2, refusal, sizeof refusal - 1) < 0) return;
    }
}
