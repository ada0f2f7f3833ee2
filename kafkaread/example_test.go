package kafkaread_test

import (
	"encoding/json"
	"net/http"

	"svc/kafkaread"
)

// ExampleReader_Stream sketches the NDJSON handler of
// GET /api/v1/debug/kafka/{alias}/messages: errors before the first line
// become a status code, an error after it becomes a final error line.
func ExampleReader_Stream() {
	var r *kafkaread.Reader // from kafkaread.New(kafkaread.BuildAliases(...))
	_ = func(w http.ResponseWriter, req *http.Request) {
		q, err := kafkaread.ParseStreamQuery(req.URL.Query())
		if err != nil {
			http.Error(w, err.Error(), kafkaread.Status(err))
			return
		}
		flusher, _ := w.(http.Flusher)
		enc, started := json.NewEncoder(w), false
		err = r.Stream(req.Context(), req.PathValue("alias"), q, func(rec kafkaread.Record) error {
			if !started {
				w.Header().Set("Content-Type", "application/x-ndjson")
				started = true
			}
			if err := enc.Encode(rec); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
			return nil
		})
		switch {
		case err != nil && !started:
			http.Error(w, err.Error(), kafkaread.Status(err))
		case err != nil && req.Context().Err() == nil:
			_, _ = w.Write(kafkaread.ErrorLine(err))
		case !started:
			w.Header().Set("Content-Type", "application/x-ndjson")
		}
	}
}
