//go:build amd64 && !purego

#include "textflag.h"

// CRC-64/Jones with PCLMULQDQ. The arithmetic (reflected representation,
// fold pairs, Barrett reduction) is explained in doc.go and crc64_clmul.go;
// the offsets below are those of clmulConsts:
//   0 fold512, 16 fold384, 32 fold256, 48 fold128, 64 x127, 72 mu, 80 poly.
//
// An XMM register holds 16 message bytes as loaded: its low qword is the
// high-degree half of that 128-bit polynomial, its high qword the low half.

// BARRETT reduces the 128-bit polynomial in X0 modulo P and leaves the
// 64-bit result in AX. K holds the address of the constants. Clobbers X1,
// X2, BX, CX.
//   q = hi ^ hi64(hi·mu)   (the product's high half is lo64 of the reflected
//                           product shifted left by one)
//   r = lo ^ lo64(q·poly)  (likewise: bits 63..126 of the reflected product)
#define BARRETT(K) \
	MOVQ      72(K), X1      \
	PCLMULQDQ $0x00, X0, X1  \
	PSLLQ     $1, X1         \
	PXOR      X0, X1         \
	MOVQ      80(K), X2      \
	PCLMULQDQ $0x00, X2, X1  \
	MOVQ      X1, BX         \
	PEXTRQ    $1, X1, CX     \
	SHRQ      $63, BX        \
	SHLQ      $1, CX         \
	ORQ       BX, CX         \
	PEXTRQ    $1, X0, AX     \
	XORQ      CX, AX

// FOLD moves the 128-bit chunk in R forward by the distance of the fold pair
// in KR: R = R.lo·KR.lo ^ R.hi·KR.hi. T is scratch.
#define FOLD(R, T, KR) \
	MOVOA     R, T          \
	PCLMULQDQ $0x00, KR, R  \
	PCLMULQDQ $0x11, KR, T  \
	PXOR      T, R

// func crc64FoldCLMUL(crc uint64, p []byte, k *clmulConsts) uint64
// Requires len(p) to be a non-zero multiple of 16.
TEXT ·crc64FoldCLMUL(SB), NOSPLIT, $0-48
	MOVQ crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	MOVQ k+32(FP), DX

	// The running CRC is added to the first 8 message bytes: shifting it
	// over the whole message is the same as shifting those bytes.
	MOVQ AX, X8
	CMPQ CX, $64
	JB   one

	// Four accumulators, each advancing 64 bytes per iteration, so the
	// multiplies of one iteration do not wait for each other.
	MOVOU (SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2
	MOVOU 48(SI), X3
	PXOR  X8, X0
	ADDQ  $64, SI
	SUBQ  $64, CX
	MOVOU 0(DX), X9
	CMPQ  CX, $64
	JB    merge4

loop4:
	MOVOA     X0, X4
	MOVOA     X1, X5
	MOVOA     X2, X6
	MOVOA     X3, X7
	PCLMULQDQ $0x00, X9, X0
	PCLMULQDQ $0x00, X9, X1
	PCLMULQDQ $0x00, X9, X2
	PCLMULQDQ $0x00, X9, X3
	PCLMULQDQ $0x11, X9, X4
	PCLMULQDQ $0x11, X9, X5
	PCLMULQDQ $0x11, X9, X6
	PCLMULQDQ $0x11, X9, X7
	MOVOU     (SI), X10
	MOVOU     16(SI), X11
	MOVOU     32(SI), X12
	MOVOU     48(SI), X13
	PXOR      X4, X0
	PXOR      X5, X1
	PXOR      X6, X2
	PXOR      X7, X3
	PXOR      X10, X0
	PXOR      X11, X1
	PXOR      X12, X2
	PXOR      X13, X3
	ADDQ      $64, SI
	SUBQ      $64, CX
	CMPQ      CX, $64
	JAE       loop4

merge4:
	// Fold accumulators 0, 1, 2 onto 3 (384, 256 and 128 bits ahead).
	MOVOU 16(DX), X9
	FOLD(X0, X4, X9)
	MOVOU 32(DX), X9
	FOLD(X1, X5, X9)
	MOVOU 48(DX), X9
	FOLD(X2, X6, X9)
	PXOR  X0, X3
	PXOR  X1, X3
	PXOR  X2, X3
	MOVOA X3, X0
	JMP   loop1

one:
	MOVOU (SI), X0
	PXOR  X8, X0
	ADDQ  $16, SI
	SUBQ  $16, CX
	MOVOU 48(DX), X9

loop1:
	// One accumulator, 16 bytes at a time (X9 = fold128).
	CMPQ  CX, $16
	JB    reduce
	FOLD(X0, X4, X9)
	MOVOU (SI), X10
	PXOR  X10, X0
	ADDQ  $16, SI
	SUBQ  $16, CX
	JMP   loop1

reduce:
	// CRC = R·x^64 mod P for the last chunk R = A·x^64 + B:
	// A·x^128 via one multiply by xpow(127), B·x^64 by moving B up a qword.
	MOVOA     X0, X1
	MOVQ      64(DX), X2
	PCLMULQDQ $0x00, X2, X0
	PSRLDQ    $8, X1
	PXOR      X1, X0
	BARRETT(DX)
	MOVQ      AX, ret+40(FP)
	RET

// func crc64ShiftCLMUL(crc, n uint64, t *shiftTable, k *clmulConsts) uint64
// Each shiftTable row is 16 pairs of 16 bytes (256 bytes): one row per hex
// digit of n, the pair for the digit's value.
TEXT ·crc64ShiftCLMUL(SB), NOSPLIT, $0-40
	MOVQ   crc+0(FP), AX
	MOVQ   n+8(FP), BX
	MOVQ   t+16(FP), DI
	MOVQ   k+24(FP), DX
	MOVQ   AX, X0
	PSLLDQ $8, X0 // crc has degree < 64: it is the low-degree half

shiftloop:
	MOVQ  BX, CX
	ANDQ  $15, CX
	JZ    shiftnext
	SHLQ  $4, CX
	MOVOU (DI)(CX*1), X3
	FOLD(X0, X4, X3)

shiftnext:
	ADDQ $256, DI
	SHRQ $4, BX
	JNZ  shiftloop

	BARRETT(DX)
	MOVQ AX, ret+32(FP)
	RET

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET
