/* Preloaded (LD_PRELOAD) by `cargo xtask without-avx512` and `cargo xtask
 * bench --hide-avx512`: makes the CPUID instruction report no AVX-512 to
 * this process and its children, so that our kernels (and onnxruntime's,
 * in the bench) pick their AVX2 + FMA code on an AVX-512 machine, and the
 * AVX2 paths can be judged and measured where no AVX2-only machine is at
 * hand.
 *
 * How: Linux's ARCH_SET_CPUID (CPUs with CPUID faulting, the `cpuid_fault`
 * flag of /proc/cpuinfo) makes CPUID raise SIGSEGV; the handler runs the
 * real CPUID with faulting briefly off, clears the AVX-512 bits, writes the
 * result into the faulting thread's registers and steps over the
 * instruction. The setting is per thread and inherited by threads created
 * later; execve clears it, and this library's constructor sets it again in
 * each new program that inherits LD_PRELOAD. Any other SIGSEGV goes back to
 * the default action and is raised again. XGETBV is not changed: programs
 * test the CPUID bit before the OS's register state.
 *
 * Where faulting is unavailable the constructor says so on stderr and
 * changes nothing; the xtask checks that AVX-512 is gone before it runs
 * anything under it. */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static long cpuid_faulting(int faulting) {
    /* ARCH_SET_CPUID's argument is 1 for CPUID allowed, 0 for faulting. */
    return syscall(SYS_arch_prctl, ARCH_SET_CPUID, faulting ? 0 : 1);
}

/* Leaf 7 subleaf 0: EBX AVX512F, DQ, IFMA, PF, ER, CD, BW, VL; ECX VBMI,
 * VBMI2, VNNI, BITALG, VPOPCNTDQ; EDX 4VNNIW, 4FMAPS, VP2INTERSECT, FP16.
 * Subleaf 1: EAX AVX512_BF16. */
#define EBX7 ((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) | (1u << 30) | (1u << 31))
#define ECX7 ((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14))
#define EDX7 ((1u << 2) | (1u << 3) | (1u << 8) | (1u << 23))
#define EAX7_1 (1u << 5)

static void on_segv(int sig, siginfo_t *info, void *context) {
    ucontext_t *uc = context;
    greg_t *r = uc->uc_mcontext.gregs;
    /* A faulting CPUID arrives as SI_KERNEL; a bad address (even the
     * instruction pointer's own) as SEGV_MAPERR or SEGV_ACCERR, and then
     * the instruction is not read. */
    const unsigned char *ip = (const unsigned char *)r[REG_RIP];
    if (info->si_code != SI_KERNEL || ip[0] != 0x0f || ip[1] != 0xa2) {
        signal(sig, SIG_DFL);
        return;
    }
    uint32_t leaf = (uint32_t)r[REG_RAX], subleaf = (uint32_t)r[REG_RCX];
    uint32_t a = leaf, b, c = subleaf, d;
    cpuid_faulting(0);
    __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    cpuid_faulting(1);
    if (leaf == 7 && subleaf == 0) {
        b &= ~EBX7;
        c &= ~ECX7;
        d &= ~EDX7;
    } else if (leaf == 7 && subleaf == 1) {
        a &= ~EAX7_1;
    }
    /* CPUID writes the low 32 bits and zeroes the high ones. */
    r[REG_RAX] = a;
    r[REG_RBX] = b;
    r[REG_RCX] = c;
    r[REG_RDX] = d;
    r[REG_RIP] += 2;
}

__attribute__((constructor)) static void hide_avx512(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0 || cpuid_faulting(1) != 0) {
        static const char msg[] = "hide_avx512: CPUID faulting is unavailable here; AVX-512 stays visible\n";
        ssize_t ignored = write(2, msg, sizeof msg - 1);
        (void)ignored;
    }
}
