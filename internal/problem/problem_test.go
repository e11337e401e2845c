package problem_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/hookonce/hookonce/internal/problem"
)

func TestWrite(t *testing.T) {
	w := httptest.NewRecorder()
	problem.Write(w, 409, "Delivery in progress", "retry later")
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if w.Code != 409 || w.Header().Get("Content-Type") != "application/problem+json" || w.Header().Get("Cache-Control") != "no-store" ||
		got["title"] != "Delivery in progress" || got["detail"] != "retry later" || got["status"] != 409.0 || got["type"] != "about:blank" {
		t.Fatalf("%d %v %v", w.Code, w.Header(), got)
	}
}
