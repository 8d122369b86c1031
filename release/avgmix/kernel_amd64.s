#include "textflag.h"

// func addGroupAVX2(acc *float64, grp *group, n int)
//
// For j < n&^15: acc[j] += g[0][j] + ... + g[7][j], converting each float32
// to float64 (exact) and adding in float64 (exact for the quantised values
// Release stores). Each iteration covers 16 floats (64 bytes) of every row and
// prefetches the same 64 bytes of rows g[8..15].
TEXT ·addGroupAVX2(SB), NOSPLIT, $0-24
	MOVQ acc+0(FP), DI
	MOVQ grp+8(FP), R13
	MOVQ n+16(FP), CX
	ANDQ $-16, CX
	JZ   done
	MOVQ 0(R13), SI
	MOVQ 8(R13), BX
	MOVQ 16(R13), DX
	MOVQ 24(R13), R8
	MOVQ 32(R13), R9
	MOVQ 40(R13), R10
	MOVQ 48(R13), R11
	MOVQ 56(R13), R12
	XORQ AX, AX

loop:
	// Prefetch the next group's rows (R14 is scratch in ABI0 code).
	MOVQ 64(R13), R14
	PREFETCHT0 (R14)(AX*4)
	MOVQ 72(R13), R14
	PREFETCHT0 (R14)(AX*4)
	MOVQ 80(R13), R14
	PREFETCHT0 (R14)(AX*4)
	MOVQ 88(R13), R14
	PREFETCHT0 (R14)(AX*4)
	MOVQ 96(R13), R14
	PREFETCHT0 (R14)(AX*4)
	MOVQ 104(R13), R14
	PREFETCHT0 (R14)(AX*4)
	MOVQ 112(R13), R14
	PREFETCHT0 (R14)(AX*4)
	MOVQ 120(R13), R14
	PREFETCHT0 (R14)(AX*4)

	// Rows 0 and 1 into Y0-Y3.
	VCVTPS2PD (SI)(AX*4), Y0
	VCVTPS2PD 16(SI)(AX*4), Y1
	VCVTPS2PD 32(SI)(AX*4), Y2
	VCVTPS2PD 48(SI)(AX*4), Y3
	VCVTPS2PD (BX)(AX*4), Y4
	VCVTPS2PD 16(BX)(AX*4), Y5
	VCVTPS2PD 32(BX)(AX*4), Y6
	VCVTPS2PD 48(BX)(AX*4), Y7
	VADDPD    Y4, Y0, Y0
	VADDPD    Y5, Y1, Y1
	VADDPD    Y6, Y2, Y2
	VADDPD    Y7, Y3, Y3

	// Rows 2 and 3 into Y8-Y11.
	VCVTPS2PD (DX)(AX*4), Y8
	VCVTPS2PD 16(DX)(AX*4), Y9
	VCVTPS2PD 32(DX)(AX*4), Y10
	VCVTPS2PD 48(DX)(AX*4), Y11
	VCVTPS2PD (R8)(AX*4), Y4
	VCVTPS2PD 16(R8)(AX*4), Y5
	VCVTPS2PD 32(R8)(AX*4), Y6
	VCVTPS2PD 48(R8)(AX*4), Y7
	VADDPD    Y4, Y8, Y8
	VADDPD    Y5, Y9, Y9
	VADDPD    Y6, Y10, Y10
	VADDPD    Y7, Y11, Y11

	// Rows 4 and 5 into Y0-Y3.
	VCVTPS2PD (R9)(AX*4), Y4
	VCVTPS2PD 16(R9)(AX*4), Y5
	VCVTPS2PD 32(R9)(AX*4), Y6
	VCVTPS2PD 48(R9)(AX*4), Y7
	VADDPD    Y4, Y0, Y0
	VADDPD    Y5, Y1, Y1
	VADDPD    Y6, Y2, Y2
	VADDPD    Y7, Y3, Y3
	VCVTPS2PD (R10)(AX*4), Y4
	VCVTPS2PD 16(R10)(AX*4), Y5
	VCVTPS2PD 32(R10)(AX*4), Y6
	VCVTPS2PD 48(R10)(AX*4), Y7
	VADDPD    Y4, Y0, Y0
	VADDPD    Y5, Y1, Y1
	VADDPD    Y6, Y2, Y2
	VADDPD    Y7, Y3, Y3

	// Rows 6 and 7 into Y8-Y11.
	VCVTPS2PD (R11)(AX*4), Y4
	VCVTPS2PD 16(R11)(AX*4), Y5
	VCVTPS2PD 32(R11)(AX*4), Y6
	VCVTPS2PD 48(R11)(AX*4), Y7
	VADDPD    Y4, Y8, Y8
	VADDPD    Y5, Y9, Y9
	VADDPD    Y6, Y10, Y10
	VADDPD    Y7, Y11, Y11
	VCVTPS2PD (R12)(AX*4), Y4
	VCVTPS2PD 16(R12)(AX*4), Y5
	VCVTPS2PD 32(R12)(AX*4), Y6
	VCVTPS2PD 48(R12)(AX*4), Y7
	VADDPD    Y4, Y8, Y8
	VADDPD    Y5, Y9, Y9
	VADDPD    Y6, Y10, Y10
	VADDPD    Y7, Y11, Y11

	// Combine and accumulate.
	VADDPD  Y8, Y0, Y0
	VADDPD  Y9, Y1, Y1
	VADDPD  Y10, Y2, Y2
	VADDPD  Y11, Y3, Y3
	VADDPD  (DI)(AX*8), Y0, Y0
	VADDPD  32(DI)(AX*8), Y1, Y1
	VADDPD  64(DI)(AX*8), Y2, Y2
	VADDPD  96(DI)(AX*8), Y3, Y3
	VMOVUPD Y0, (DI)(AX*8)
	VMOVUPD Y1, 32(DI)(AX*8)
	VMOVUPD Y2, 64(DI)(AX*8)
	VMOVUPD Y3, 96(DI)(AX*8)

	ADDQ $16, AX
	CMPQ AX, CX
	JLT  loop
	VZEROUPPER

done:
	RET

// func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv0() (eax, edx uint32)
TEXT ·xgetbv0(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET
