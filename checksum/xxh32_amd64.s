//go:build amd64 && !purego

#include "textflag.h"

// XXH32's prime2 = 2246822519 = 0x85EBCA77; prime1 = 2654435761 appears
// below as the signed 32-bit immediate -1640531535 (the same bits).
#define PRIME2 $0x85EBCA77

// LANE finishes one lane: acc = rotl32(acc + product, 13) · prime1, the
// product read back from the frame.
#define LANE(ACC, OFF) \
	ADDL   OFF(SP), ACC \
	ROLL   $13, ACC     \
	IMUL3L $-1640531535, ACC, ACC

// func xxh32StripesSSE41(acc *xxh32Acc, p []byte)
// Requires len(p) to be a non-zero multiple of 16.
//
// Products go through a 64-byte frame: four stripes' worth are computed
// and stored, then the lanes add them with memory operands, which keeps
// the integer ALUs for the chains.
TEXT ·xxh32StripesSSE41(SB), NOSPLIT, $64-32
	MOVQ acc+0(FP), DI
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	MOVL 0(DI), R8
	MOVL 4(DI), R9
	MOVL 8(DI), R10
	MOVL 12(DI), R11

	MOVL   PRIME2, AX
	MOVQ   AX, X7
	PSHUFD $0, X7, X7

	CMPQ CX, $64
	JB   single

loop4:
	MOVOU  0(SI), X0
	MOVOU  16(SI), X1
	MOVOU  32(SI), X2
	MOVOU  48(SI), X3
	PMULLD X7, X0
	PMULLD X7, X1
	PMULLD X7, X2
	PMULLD X7, X3
	MOVOU  X0, 0(SP)
	MOVOU  X1, 16(SP)
	MOVOU  X2, 32(SP)
	MOVOU  X3, 48(SP)
	LANE(R8, 0)
	LANE(R9, 4)
	LANE(R10, 8)
	LANE(R11, 12)
	LANE(R8, 16)
	LANE(R9, 20)
	LANE(R10, 24)
	LANE(R11, 28)
	LANE(R8, 32)
	LANE(R9, 36)
	LANE(R10, 40)
	LANE(R11, 44)
	LANE(R8, 48)
	LANE(R9, 52)
	LANE(R10, 56)
	LANE(R11, 60)
	ADDQ   $64, SI
	SUBQ   $64, CX
	CMPQ   CX, $64
	JAE    loop4

single:
	TESTQ CX, CX
	JZ    done

loop1:
	MOVOU  (SI), X0
	PMULLD X7, X0
	MOVOU  X0, 0(SP)
	LANE(R8, 0)
	LANE(R9, 4)
	LANE(R10, 8)
	LANE(R11, 12)
	ADDQ   $16, SI
	SUBQ   $16, CX
	JNZ    loop1

done:
	MOVL R8, 0(DI)
	MOVL R9, 4(DI)
	MOVL R10, 8(DI)
	MOVL R11, 12(DI)
	RET
