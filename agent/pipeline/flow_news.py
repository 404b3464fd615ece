"""The news part of a coordinator step: report what the news task of this iteration found."""
from __future__ import annotations


class NewsStage:
    def collect_news(self) -> None:
        key = f"{self.state.iteration}:news"
        out = self._outputs(key).get(key)
        if not out:
            return
        if "error" in out:  # the task itself failed for good
            out = {"status": "error", "reason": out["error"], "query": self.state.pending_news_query, "count": 0}
        self.state.news_status = out["status"] if out["status"] == "ok" else f"{out['status']}: {out.get('reason', '')}"
        message = (f"Found {out['count']} news articles" if out["status"] == "ok"
                   else f"News search {out['status']}: {out.get('reason', '')}")
        self.emit("news_search", message, status=out["status"], query=out.get("query"), articles=out.get("count", 0),
                  reason=out.get("reason"))
