#include "textflag.h"

// The units of a feature row are int32 (see group in kernel.go), so eight
// rows add exactly with VPADDD: 8 (AVX2) or 16 (AVX-512) lanes per
// instruction, against 4 float64 lanes and a conversion for float32 rows.
// Each iteration covers 16 values (64 bytes, one cache line) of every row and
// prefetches the same line of rows g[8..15]; the label rows (g[16..23] their
// first values, g[24..31] their last) are prefetched once at the start. The gather is bound by memory: the
// prefetches matter more than the lanes (see BenchmarkGather).

// func addUnitsAVX2(acc *int32, grp *group, n int)
TEXT ·addUnitsAVX2(SB), NOSPLIT, $0-24
	MOVQ acc+0(FP), DI
	MOVQ grp+8(FP), R13
	MOVQ n+16(FP), CX
	ANDQ $-16, CX
	JZ   done2
	MOVQ 0(R13), SI
	MOVQ 8(R13), BX
	MOVQ 16(R13), DX
	MOVQ 24(R13), R8
	MOVQ 32(R13), R9
	MOVQ 40(R13), R10
	MOVQ 48(R13), R11
	MOVQ 56(R13), R12

	// Prefetch the next group's label rows, first and last values.
	MOVQ 128(R13), AX
	PREFETCHT0 (AX)
	MOVQ 136(R13), AX
	PREFETCHT0 (AX)
	MOVQ 144(R13), AX
	PREFETCHT0 (AX)
	MOVQ 152(R13), AX
	PREFETCHT0 (AX)
	MOVQ 160(R13), AX
	PREFETCHT0 (AX)
	MOVQ 168(R13), AX
	PREFETCHT0 (AX)
	MOVQ 176(R13), AX
	PREFETCHT0 (AX)
	MOVQ 184(R13), AX
	PREFETCHT0 (AX)
	MOVQ 192(R13), AX
	PREFETCHT0 (AX)
	MOVQ 200(R13), AX
	PREFETCHT0 (AX)
	MOVQ 208(R13), AX
	PREFETCHT0 (AX)
	MOVQ 216(R13), AX
	PREFETCHT0 (AX)
	MOVQ 224(R13), AX
	PREFETCHT0 (AX)
	MOVQ 232(R13), AX
	PREFETCHT0 (AX)
	MOVQ 240(R13), AX
	PREFETCHT0 (AX)
	MOVQ 248(R13), AX
	PREFETCHT0 (AX)
	XORQ AX, AX

loop2:
	// Prefetch the next group's feature rows (R14 is scratch in ABI0 code).
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

	// Two chains: rows 0, 2, 4, 6 and rows 1, 3, 5, 7.
	VMOVDQU (SI)(AX*4), Y0
	VMOVDQU 32(SI)(AX*4), Y1
	VMOVDQU (BX)(AX*4), Y2
	VMOVDQU 32(BX)(AX*4), Y3
	VPADDD  (DX)(AX*4), Y0, Y0
	VPADDD  32(DX)(AX*4), Y1, Y1
	VPADDD  (R8)(AX*4), Y2, Y2
	VPADDD  32(R8)(AX*4), Y3, Y3
	VPADDD  (R9)(AX*4), Y0, Y0
	VPADDD  32(R9)(AX*4), Y1, Y1
	VPADDD  (R10)(AX*4), Y2, Y2
	VPADDD  32(R10)(AX*4), Y3, Y3
	VPADDD  (R11)(AX*4), Y0, Y0
	VPADDD  32(R11)(AX*4), Y1, Y1
	VPADDD  (R12)(AX*4), Y2, Y2
	VPADDD  32(R12)(AX*4), Y3, Y3
	VPADDD  Y2, Y0, Y0
	VPADDD  Y3, Y1, Y1
	VPADDD  (DI)(AX*4), Y0, Y0
	VPADDD  32(DI)(AX*4), Y1, Y1
	VMOVDQU Y0, (DI)(AX*4)
	VMOVDQU Y1, 32(DI)(AX*4)

	ADDQ $16, AX
	CMPQ AX, CX
	JLT  loop2
	VZEROUPPER

done2:
	RET

// func addUnitsAVX512(acc *int32, grp *group, n int)
TEXT ·addUnitsAVX512(SB), NOSPLIT, $0-24
	MOVQ acc+0(FP), DI
	MOVQ grp+8(FP), R13
	MOVQ n+16(FP), CX
	ANDQ $-16, CX
	JZ   done5
	MOVQ 0(R13), SI
	MOVQ 8(R13), BX
	MOVQ 16(R13), DX
	MOVQ 24(R13), R8
	MOVQ 32(R13), R9
	MOVQ 40(R13), R10
	MOVQ 48(R13), R11
	MOVQ 56(R13), R12

	// Prefetch the next group's label rows, first and last values.
	MOVQ 128(R13), AX
	PREFETCHT0 (AX)
	MOVQ 136(R13), AX
	PREFETCHT0 (AX)
	MOVQ 144(R13), AX
	PREFETCHT0 (AX)
	MOVQ 152(R13), AX
	PREFETCHT0 (AX)
	MOVQ 160(R13), AX
	PREFETCHT0 (AX)
	MOVQ 168(R13), AX
	PREFETCHT0 (AX)
	MOVQ 176(R13), AX
	PREFETCHT0 (AX)
	MOVQ 184(R13), AX
	PREFETCHT0 (AX)
	MOVQ 192(R13), AX
	PREFETCHT0 (AX)
	MOVQ 200(R13), AX
	PREFETCHT0 (AX)
	MOVQ 208(R13), AX
	PREFETCHT0 (AX)
	MOVQ 216(R13), AX
	PREFETCHT0 (AX)
	MOVQ 224(R13), AX
	PREFETCHT0 (AX)
	MOVQ 232(R13), AX
	PREFETCHT0 (AX)
	MOVQ 240(R13), AX
	PREFETCHT0 (AX)
	MOVQ 248(R13), AX
	PREFETCHT0 (AX)
	XORQ AX, AX

loop5:
	// Prefetch the next group's feature rows (R14 is scratch in ABI0 code).
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

	// Two chains: rows 0, 2, 4, 6 and rows 1, 3, 5, 7.
	VMOVDQU32 (SI)(AX*4), Z0
	VMOVDQU32 (BX)(AX*4), Z1
	VPADDD    (DX)(AX*4), Z0, Z0
	VPADDD    (R8)(AX*4), Z1, Z1
	VPADDD    (R9)(AX*4), Z0, Z0
	VPADDD    (R10)(AX*4), Z1, Z1
	VPADDD    (R11)(AX*4), Z0, Z0
	VPADDD    (R12)(AX*4), Z1, Z1
	VPADDD    Z1, Z0, Z0
	VPADDD    (DI)(AX*4), Z0, Z0
	VMOVDQU32 Z0, (DI)(AX*4)

	ADDQ $16, AX
	CMPQ AX, CX
	JLT  loop5
	VZEROUPPER

done5:
	RET

// func unitSumsAVX2(acc *float64, u *int32, n int, h float64)
//
// For j < n&^7: acc[j] = (acc[j] + float64(u[j])) * h, then u[j] = 0.
TEXT ·unitSumsAVX2(SB), NOSPLIT, $0-32
	MOVQ         acc+0(FP), DI
	MOVQ         u+8(FP), SI
	MOVQ         n+16(FP), CX
	ANDQ         $-8, CX
	JZ           sdone2
	VBROADCASTSD h+24(FP), Y15
	VPXOR        Y14, Y14, Y14
	XORQ         AX, AX

sloop2:
	VCVTDQ2PD (SI)(AX*4), Y0
	VCVTDQ2PD 16(SI)(AX*4), Y1
	VADDPD    (DI)(AX*8), Y0, Y0
	VADDPD    32(DI)(AX*8), Y1, Y1
	VMULPD    Y15, Y0, Y0
	VMULPD    Y15, Y1, Y1
	VMOVUPD   Y0, (DI)(AX*8)
	VMOVUPD   Y1, 32(DI)(AX*8)
	VMOVDQU   Y14, (SI)(AX*4)
	ADDQ      $8, AX
	CMPQ      AX, CX
	JLT       sloop2
	VZEROUPPER

sdone2:
	RET

// func unitSumsAVX512(acc *float64, u *int32, n int, h float64)
//
// unitSumsAVX2 with 512-bit registers, for j < n&^15.
TEXT ·unitSumsAVX512(SB), NOSPLIT, $0-32
	MOVQ         acc+0(FP), DI
	MOVQ         u+8(FP), SI
	MOVQ         n+16(FP), CX
	ANDQ         $-16, CX
	JZ           sdone5
	VBROADCASTSD h+24(FP), Z15
	VPXORD       Z14, Z14, Z14
	XORQ         AX, AX

sloop5:
	VCVTDQ2PD (SI)(AX*4), Z0
	VCVTDQ2PD 32(SI)(AX*4), Z1
	VADDPD    (DI)(AX*8), Z0, Z0
	VADDPD    64(DI)(AX*8), Z1, Z1
	VMULPD    Z15, Z0, Z0
	VMULPD    Z15, Z1, Z1
	VMOVUPD   Z0, (DI)(AX*8)
	VMOVUPD   Z1, 64(DI)(AX*8)
	VMOVDQU32 Z14, (SI)(AX*4)
	ADDQ      $16, AX
	CMPQ      AX, CX
	JLT       sloop5
	VZEROUPPER

sdone5:
	RET

// func fromUnitsAVX512(v *float32, n int, h float32)
//
// For j < n&^31: v[j] = float32(units v[j]) * h, exact (see fromUnits).
TEXT ·fromUnitsAVX512(SB), NOSPLIT, $0-20
	MOVQ         v+0(FP), SI
	MOVQ         n+8(FP), CX
	ANDQ         $-32, CX
	JZ           fdone5
	VBROADCASTSS h+16(FP), Z15
	XORQ         AX, AX

floop5:
	VCVTDQ2PS (SI)(AX*4), Z0
	VCVTDQ2PS 64(SI)(AX*4), Z1
	VMULPS    Z15, Z0, Z0
	VMULPS    Z15, Z1, Z1
	VMOVUPS   Z0, (SI)(AX*4)
	VMOVUPS   Z1, 64(SI)(AX*4)
	ADDQ      $32, AX
	CMPQ      AX, CX
	JLT       floop5
	VZEROUPPER

fdone5:
	RET

// func fromUnitsAVX2(v *float32, n int, h float32)
//
// fromUnitsAVX512 with 256-bit registers, for j < n&^15.
TEXT ·fromUnitsAVX2(SB), NOSPLIT, $0-20
	MOVQ         v+0(FP), SI
	MOVQ         n+8(FP), CX
	ANDQ         $-16, CX
	JZ           fdone2
	VBROADCASTSS h+16(FP), Y15
	XORQ         AX, AX

floop2:
	VCVTDQ2PS (SI)(AX*4), Y0
	VCVTDQ2PS 32(SI)(AX*4), Y1
	VMULPS    Y15, Y0, Y0
	VMULPS    Y15, Y1, Y1
	VMOVUPS   Y0, (SI)(AX*4)
	VMOVUPS   Y1, 32(SI)(AX*4)
	ADDQ      $16, AX
	CMPQ      AX, CX
	JLT       floop2
	VZEROUPPER

fdone2:
	RET
