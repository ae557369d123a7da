package main

import "encoding/binary"

// A frame is stampBytes of stamp (session index u32, sequence u64, little-endian) followed by
// deterministic noise-like PCM16. The body depends on the stamp (a window into a longer noise
// buffer), so a relay that swaps or mixes frames up is caught, yet checking it costs one compare.
const (
	stampBytes  = 12
	bodyOffsets = 251 // distinct bodies: a prime, so neighbouring frames start far apart
)

type framer struct {
	frameBytes int
	noise      []byte // frameBytes - stampBytes + 2*bodyOffsets bytes of PCM16 noise
}

func newFramer(frameBytes int) *framer {
	noise := make([]byte, frameBytes-stampBytes+2*bodyOffsets)
	state := uint32(0x9E3779B9)
	for i := 0; i+1 < len(noise); i += 2 {
		state ^= state << 13 // xorshift32: cheap, fixed, speech-level amplitude below
		state ^= state >> 17
		state ^= state << 5
		sample := int16(int32(state>>16)%16000 - 8000)
		binary.LittleEndian.PutUint16(noise[i:], uint16(sample))
	}
	return &framer{frameBytes: frameBytes, noise: noise}
}

// body is what must follow the stamp of frame (session, sequence).
func (f *framer) body(session uint32, sequence uint64) []byte {
	offset := 2 * int((sequence*7+uint64(session)*13)%bodyOffsets)
	return f.noise[offset : offset+f.frameBytes-stampBytes]
}

// fill writes frame (session, sequence) into dst, which is frameBytes long.
func (f *framer) fill(dst []byte, session uint32, sequence uint64) {
	binary.LittleEndian.PutUint32(dst[0:], session)
	binary.LittleEndian.PutUint64(dst[4:], sequence)
	copy(dst[stampBytes:], f.body(session, sequence))
}

func readStamp(frame []byte) (session uint32, sequence uint64) {
	return binary.LittleEndian.Uint32(frame[0:]), binary.LittleEndian.Uint64(frame[4:])
}
