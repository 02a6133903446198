//go:build amd64 && !purego

#include "textflag.h"

// XXH64's prime2 = 14029467366897019727 = 0xC2B2AE3D27D4EB4F, prime1 =
// 11400714785074694791 = 0x9E3779B185EBCA87.
#define PRIME1 $0x9E3779B185EBCA87
#define PRIME2 $0xC2B2AE3D27D4EB4F

// LANE finishes one lane: acc = rotl64(acc + product, 31) · prime1
// (prime1 in R12), the product read back from the frame.
#define LANE(ACC, OFF) \
	ADDQ  OFF(SP), ACC \
	ROLQ  $31, ACC     \
	IMULQ R12, ACC

// func xxh64StripesAVX512(acc *xxh64Acc, p []byte)
// Requires len(p) to be a non-zero multiple of 32, AVX512DQ and AVX512VL.
//
// Products go through a 128-byte frame: four stripes' worth are computed
// and stored, then the lanes add them with memory operands, which keeps
// the integer ALUs for the chains.
TEXT ·xxh64StripesAVX512(SB), NOSPLIT, $128-32
	MOVQ acc+0(FP), DI
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	MOVQ 0(DI), R8
	MOVQ 8(DI), R9
	MOVQ 16(DI), R10
	MOVQ 24(DI), R11

	MOVQ         PRIME1, R12
	MOVQ         PRIME2, AX
	VPBROADCASTQ AX, Y7

	CMPQ CX, $128
	JB   single

loop4:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VPMULLQ Y7, Y0, Y0
	VPMULLQ Y7, Y1, Y1
	VPMULLQ Y7, Y2, Y2
	VPMULLQ Y7, Y3, Y3
	VMOVDQU Y0, 0(SP)
	VMOVDQU Y1, 32(SP)
	VMOVDQU Y2, 64(SP)
	VMOVDQU Y3, 96(SP)
	LANE(R8, 0)
	LANE(R9, 8)
	LANE(R10, 16)
	LANE(R11, 24)
	LANE(R8, 32)
	LANE(R9, 40)
	LANE(R10, 48)
	LANE(R11, 56)
	LANE(R8, 64)
	LANE(R9, 72)
	LANE(R10, 80)
	LANE(R11, 88)
	LANE(R8, 96)
	LANE(R9, 104)
	LANE(R10, 112)
	LANE(R11, 120)
	ADDQ $128, SI
	SUBQ $128, CX
	CMPQ CX, $128
	JAE  loop4

single:
	TESTQ CX, CX
	JZ    done

loop1:
	VMOVDQU (SI), Y0
	VPMULLQ Y7, Y0, Y0
	VMOVDQU Y0, 0(SP)
	LANE(R8, 0)
	LANE(R9, 8)
	LANE(R10, 16)
	LANE(R11, 24)
	ADDQ $32, SI
	SUBQ $32, CX
	JNZ  loop1

done:
	VZEROUPPER
	MOVQ R8, 0(DI)
	MOVQ R9, 8(DI)
	MOVQ R10, 16(DI)
	MOVQ R11, 24(DI)
	RET
