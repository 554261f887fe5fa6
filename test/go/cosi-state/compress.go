package main

import (
	"compress/flate"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
)

// compress is the gzip handler Omni puts in front of /api/ (docs/omni-wire.md 1.7): Vary always, the first
// Accept-Encoding token that is exactly "gzip" or "deflate" (raw DEFLATE), nothing for Upgrade
// requests, and every Flush of the handler flushes the compressor so stream lines arrive at once.
func compress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")

		enc := pickEncoding(r)
		if enc == "" {
			next.ServeHTTP(w, r)

			return
		}

		var z interface {
			io.WriteCloser
			Flush() error
		}

		if enc == "gzip" {
			z, _ = gzip.NewWriterLevel(w, gzip.DefaultCompression)
		} else {
			z, _ = flate.NewWriter(w, flate.DefaultCompression)
		}

		cw := &compressWriter{ResponseWriter: w, z: z, enc: enc}
		defer cw.Close()

		next.ServeHTTP(cw, r)
	})
}

func pickEncoding(r *http.Request) string {
	if r.Header.Get("Upgrade") != "" {
		return ""
	}

	for _, t := range strings.Split(strings.Join(r.Header.Values("Accept-Encoding"), ","), ",") {
		switch t = strings.TrimSpace(t); t {
		case "gzip", "deflate":
			return t
		}
	}

	return ""
}

type compressWriter struct {
	http.ResponseWriter

	z interface {
		io.WriteCloser
		Flush() error
	}
	enc         string
	wroteHeader bool
}

func (c *compressWriter) WriteHeader(code int) {
	if !c.wroteHeader {
		c.wroteHeader = true
		c.Header().Set("Content-Encoding", c.enc)
		c.Header().Del("Content-Length")
	}

	c.ResponseWriter.WriteHeader(code)
}

func (c *compressWriter) Write(b []byte) (int, error) {
	if !c.wroteHeader {
		c.WriteHeader(http.StatusOK)
	}

	return c.z.Write(b)
}

func (c *compressWriter) Flush() {
	if !c.wroteHeader {
		c.WriteHeader(http.StatusOK)
	}

	_ = c.z.Flush()

	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *compressWriter) Close() {
	if !c.wroteHeader {
		// Nothing was written: no compressed (empty) body either.
		return
	}

	_ = c.z.Close()
}
