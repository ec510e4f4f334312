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

        .text
        .globl  gort_async_preempt
        .hidden gort_async_preempt
        .type   gort_async_preempt, @function
        .p2align 4
gort_async_preempt:
        .cfi_startproc
        pushfq
        pushq   %rax
        pushq   %rbx
        pushq   %rcx
        pushq   %rdx
        pushq   %rsi
        pushq   %rdi
        pushq   %rbp
        pushq   %r8
        pushq   %r9
        pushq   %r10
        pushq   %r11
        pushq   %r12
        pushq   %r13
        pushq   %r14
        pushq   %r15
        movq    %rsp, %rbx              // callee-saved: survives the call
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
        popq    %r15
        popq    %r14
        popq    %r13
        popq    %r12
        popq    %r11
        popq    %r10
        popq    %r9
        popq    %r8
        popq    %rbp
        popq    %rdi
        popq    %rsi
        popq    %rdx
        popq    %rcx
        popq    %rbx
        popq    %rax
        popfq
        ret     $128
        .cfi_endproc
        .size   gort_async_preempt, .-gort_async_preempt

        .section .note.GNU-stack,"",@progbits
