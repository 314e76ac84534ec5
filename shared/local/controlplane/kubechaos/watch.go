package kubechaos

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// maxWatchFrame bounds one protobuf frame, so a corrupt length cannot make
// the pump allocate gigabytes; the API server's request limit is 3 MiB per
// object and a watch event is one object.
const maxWatchFrame = 64 << 20

// cutWatch returns the body the client reads instead of resp.Body: the same
// events, frame by frame, until life has passed; then (with ExpireWatches
// and a known encoding) one ERROR event with Status 410 Expired, then EOF.
// Frames are relayed whole, so the cut falls between events as it does when
// the API server ends a watch.
func (c *Chaos) cutWatch(req *http.Request, resp *http.Response, life time.Duration, cancel context.CancelFunc) io.ReadCloser {
	up := resp.Body
	next, streamType := frameReader(resp, up)

	var errFrame []byte
	if c.cfg.ExpireWatches && streamType != "" {
		// Encoding cannot fail for a Status; if it ever did, the cut
		// would still happen, silently.
		errFrame, _ = watchErrorFrame(watchExpiredStatus(req), streamType)
	}

	pr, pw := io.Pipe()
	var expired atomic.Bool
	timer := time.AfterFunc(life, func() {
		expired.Store(true)
		cancel()
	})
	go func() {
		defer cancel()
		for {
			frame, err := next()
			if expired.Load() {
				if errFrame != nil {
					if _, werr := pw.Write(errFrame); werr == nil {
						c.count(StatWatchExpired)
					}
				} else {
					c.count(StatWatchClosed)
				}
				_ = pw.Close()
				return
			}
			if err != nil {
				timer.Stop()
				_ = pw.CloseWithError(err) // io.EOF reads as a clean end
				return
			}
			if _, err := pw.Write(frame); err != nil {
				timer.Stop()
				return // the client closed the body
			}
		}
	}()
	return &watchBody{pr: pr, up: up, cancel: cancel, timer: timer}
}

// watchBody is what the client reads; closing it stops the relay and the
// request to the server.
type watchBody struct {
	pr     *io.PipeReader
	up     io.ReadCloser
	cancel context.CancelFunc
	timer  *time.Timer
	once   sync.Once
}

func (b *watchBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *watchBody) Close() error {
	var err error
	b.once.Do(func() {
		b.timer.Stop()
		_ = b.pr.Close()
		b.cancel()
		err = b.up.Close()
	})
	return err
}

// frameReader returns a function reading one whole frame of the watch
// stream at a time, and the stream's encoding ("" when unknown: then it
// relays raw chunks and a cut can only be silent). client-go decodes JSON
// streams as a sequence of JSON values and protobuf streams as big-endian
// uint32 length-delimited WatchEvents; the readers here mirror both.
func frameReader(resp *http.Response, up io.Reader) (func() ([]byte, error), string) {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.Header.Get("Content-Encoding") != "" {
		mt = "" // compressed frames cannot be told apart
	}
	switch mt {
	case contentTypeJSON:
		dec := json.NewDecoder(up)
		return func() ([]byte, error) {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, err
			}
			return append(raw, '\n'), nil
		}, contentTypeJSON
	case contentTypeProtobuf:
		return func() ([]byte, error) {
			var h [4]byte
			if _, err := io.ReadFull(up, h[:]); err != nil {
				return nil, err // io.EOF only when no byte of a frame came
			}
			n := binary.BigEndian.Uint32(h[:])
			if n > maxWatchFrame {
				return nil, io.ErrUnexpectedEOF
			}
			frame := make([]byte, 4+int(n))
			copy(frame, h[:])
			if _, err := io.ReadFull(up, frame[4:]); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return nil, err
			}
			return frame, nil
		}, contentTypeProtobuf
	}
	buf := make([]byte, 32<<10)
	return func() ([]byte, error) {
		n, err := up.Read(buf)
		if n > 0 {
			return append([]byte(nil), buf[:n]...), nil
		}
		return nil, err
	}, ""
}
