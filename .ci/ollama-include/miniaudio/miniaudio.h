/*
 * miniaudio/miniaudio.h: a stand-in for the miniaudio single-file library
 * (https://miniaud.io), for building Ollama from its Go module.
 *
 * Why: Ollama's cgo build of llama.cpp includes "miniaudio/miniaudio.h"
 * from llama.cpp's vendor/ directory (tools/mtmd/mtmd-helper.cpp, which
 * decodes audio input for multimodal models), and Go's module zip of Ollama
 * leaves vendor/ out; Debian 12 has no miniaudio package. .ci/tools puts
 * this directory on CGO_CPPFLAGS for `go install github.com/ollama/ollama`.
 *
 * What: the types and functions mtmd-helper.cpp calls, each failing. With
 * it, Ollama answers audio input with an error ("unable to read"); text and
 * images are untouched. realserve/'s tests send text only.
 */
#ifndef NPU_SERVE_SMOKE_MINIAUDIO_SHIM_H
#define NPU_SERVE_SMOKE_MINIAUDIO_SHIM_H

#include <stddef.h>

typedef int ma_result;
typedef unsigned long long ma_uint64;
typedef unsigned int ma_uint32;

#define MA_SUCCESS 0
#define MA_NOT_IMPLEMENTED (-29) /* miniaudio's own code */

typedef enum { ma_format_unknown = 0, ma_format_f32 = 5 } ma_format;

typedef struct {
	ma_format format;
	ma_uint32 channels;
	ma_uint32 sampleRate;
} ma_decoder_config;

typedef struct {
	int unused;
} ma_decoder;

static inline ma_decoder_config ma_decoder_config_init(ma_format format, ma_uint32 channels, ma_uint32 sampleRate)
{
	ma_decoder_config c;
	c.format = format;
	c.channels = channels;
	c.sampleRate = sampleRate;
	return c;
}

/* Audio input is not built in: every decoder fails to open. */
static inline ma_result ma_decoder_init_memory(const void *data, size_t size, const ma_decoder_config *config, ma_decoder *decoder)
{
	(void)data;
	(void)size;
	(void)config;
	if (decoder) {
		decoder->unused = 0;
	}
	return MA_NOT_IMPLEMENTED;
}

static inline ma_result ma_decoder_get_length_in_pcm_frames(ma_decoder *decoder, ma_uint64 *length)
{
	(void)decoder;
	if (length) {
		*length = 0;
	}
	return MA_NOT_IMPLEMENTED;
}

static inline ma_result ma_decoder_read_pcm_frames(ma_decoder *decoder, void *frames, ma_uint64 count, ma_uint64 *read)
{
	(void)decoder;
	(void)frames;
	(void)count;
	if (read) {
		*read = 0;
	}
	return MA_NOT_IMPLEMENTED;
}

static inline ma_result ma_decoder_uninit(ma_decoder *decoder)
{
	(void)decoder;
	return MA_SUCCESS;
}

#endif
