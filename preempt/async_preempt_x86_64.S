// preempt/async_preempt_x86_64.S — the asynchronous preemption trampoline.
//
// The SIGURG handler made the interrupted thread "call" this function: it
// moved RSP down by 128 (the interrupted code's red zone) + 8, stored the
// interrupted RIP there, and pointed RIP here. So on entry the stack looks
// exactly as after a `call` from the interrupted instruction, except that
// RSP may have any alignment and nothing may be assumed about any register
// or flag. We save all general registers, RFLAGS and the complete extended
// state (XSAVE, area size from CPUID leaf 0xD, or FXSAVE without XSAVE),
// call gort_async_preempt_yield (which yields the P like a cooperative
// switch), restore everything and `ret $128` to the interrupted RIP with
// RSP exactly as it was.
//
// Offsets: 15 general registers + RFLAGS = 128 bytes pushed; the XSAVE
// area is 64-byte aligned below them.
//
// CFI, so that gdb, profilers and exception unwinding can walk a preempted
// goroutine's stack. The interrupted frame's CFA (its RSP) is the entry
// RSP + 8 + 128, and its RIP is at the entry RSP; every pushed register is
// recorded where it was pushed. From the realignment on, the CFA is
// computed from RBX, which holds the RSP after the pushes. The frame is a
// signal frame: the interrupted RIP is the next instruction to run, not a
// return address, and unwinders must not step back from it.

        .macro PUSH reg
        pushq   \reg
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset \reg, 0
        .endm

        .macro POP reg
        popq    \reg
        .cfi_adjust_cfa_offset -8
        .cfi_restore \reg
        .endm

        .text
        .globl  gort_async_preempt
        .hidden gort_async_preempt
        .type   gort_async_preempt, @function
        .p2align 4
gort_async_preempt:
        .cfi_startproc
        .cfi_signal_frame
        .cfi_def_cfa %rsp, 136
        .cfi_offset %rip, -136
        pushfq
        .cfi_adjust_cfa_offset 8
        // 49 is rflags' DWARF number: clang's assembler has no name for it.
        .cfi_rel_offset 49, 0
        PUSH    %rax
        PUSH    %rbx
        PUSH    %rcx
        PUSH    %rdx
        PUSH    %rsi
        PUSH    %rdi
        PUSH    %rbp
        PUSH    %r8
        PUSH    %r9
        PUSH    %r10
        PUSH    %r11
        PUSH    %r12
        PUSH    %r13
        PUSH    %r14
        PUSH    %r15
        movq    %rsp, %rbx              // callee-saved: survives the call
        .cfi_def_cfa_register %rbx
        subq    gort_xsave_size(%rip), %rsp
        andq    $-64, %rsp
        cld                             // the ABI wants DF clear at a call
        cmpl    $0, gort_xsave_mode(%rip)
        je      1f
        // XRSTOR faults unless the reserved header bytes are zero.
        xorl    %eax, %eax
        movq    %rax, 512(%rsp)
        movq    %rax, 520(%rsp)
        movq    %rax, 528(%rsp)
        movq    %rax, 536(%rsp)
        movq    %rax, 544(%rsp)
        movq    %rax, 552(%rsp)
        movq    %rax, 560(%rsp)
        movq    %rax, 568(%rsp)
        movl    $-1, %eax
        movl    $-1, %edx
        xsave64 (%rsp)
        jmp     2f
1:
        fxsave64 (%rsp)
2:
        call    gort_async_preempt_yield
        cmpl    $0, gort_xsave_mode(%rip)
        je      3f
        movl    $-1, %eax
        movl    $-1, %edx
        xrstor64 (%rsp)
        jmp     4f
3:
        fxrstor64 (%rsp)
4:
        movq    %rbx, %rsp
        .cfi_def_cfa_register %rsp
        POP     %r15
        POP     %r14
        POP     %r13
        POP     %r12
        POP     %r11
        POP     %r10
        POP     %r9
        POP     %r8
        POP     %rbp
        POP     %rdi
        POP     %rsi
        POP     %rdx
        POP     %rcx
        POP     %rbx
        POP     %rax
        popfq
        .cfi_adjust_cfa_offset -8
        .cfi_restore 49
        ret     $128
        .cfi_endproc
        .size   gort_async_preempt, .-gort_async_preempt

        .section .note.GNU-stack,"",@progbits
