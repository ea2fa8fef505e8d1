#include "agent/train/models/text/unigram_model.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace gleaner::train::text {

struct UnigramModel::Data {
  // A byte trie over the matchable pieces: edges keyed by (node << 8 | byte), and per node the
  // id of the piece that ends there (-1 for none). Node 0 is the root.
  std::unordered_map<uint64_t, int32_t> edges;
  std::vector<int32_t> node_piece{-1};
  std::vector<float> scores;
  int32_t unk_id = 0;
  float min_score = 0;

  int32_t Child(int32_t node, uint8_t byte) const {
    auto it = edges.find(uint64_t(node) << 8 | byte);
    return it == edges.end() ? -1 : it->second;
  }
};

namespace {

// SentencePiece steps through text by the length its lead byte announces (trail bytes count 1).
size_t LeadLength(uint8_t b) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[b >> 4];
}

}  // namespace

Result<UnigramModel> UnigramModel::Build(const std::vector<Piece>& pieces, int32_t unk_id) {
  if (pieces.empty()) return Status::Invalid("the vocabulary is empty");
  if (pieces.size() > size_t(std::numeric_limits<int32_t>::max())) {
    return Status::Invalid("the vocabulary is too large");
  }
  if (unk_id < 0 || size_t(unk_id) >= pieces.size()) {
    return Status::Invalid("unk_id " + std::to_string(unk_id) + " is not a vocabulary id (0.." +
                           std::to_string(pieces.size() - 1) + ")");
  }
  auto d = std::make_shared<Data>();
  d->unk_id = unk_id;
  d->scores.reserve(pieces.size());
  float min_score = std::numeric_limits<float>::max();
  bool any = false;
  for (size_t id = 0; id < pieces.size(); ++id) {
    const Piece& p = pieces[id];
    d->scores.push_back(p.score);
    if (!p.matchable || int32_t(id) == unk_id) continue;
    if (p.text.empty()) return Status::Invalid("piece " + std::to_string(id) + " is empty");
    int32_t node = 0;
    for (char c : p.text) {
      uint64_t key = uint64_t(node) << 8 | uint8_t(c);
      auto it = d->edges.find(key);
      if (it == d->edges.end()) {
        it = d->edges.emplace(key, int32_t(d->node_piece.size())).first;
        d->node_piece.push_back(-1);
      }
      node = it->second;
    }
    if (d->node_piece[size_t(node)] >= 0) {
      return Status::Invalid("piece " + std::to_string(id) + " (\"" + p.text.substr(0, 64) +
                             "\") repeats piece " + std::to_string(d->node_piece[size_t(node)]));
    }
    d->node_piece[size_t(node)] = int32_t(id);
    min_score = std::min(min_score, p.score);
    any = true;
  }
  d->min_score = any ? min_score : 0.0f;
  UnigramModel m;
  m.data_ = std::move(d);
  return m;
}

std::vector<UnigramModel::Token> UnigramModel::Encode(std::string_view normalized) const {
  std::vector<Token> out;
  if (!data_ || normalized.empty()) return out;
  const Data& d = *data_;
  struct Best {
    float score = 0;     // total score of the best path ending here
    int64_t start = -1;  // where its last token starts (-1: not reached yet)
    int32_t id = -1;     // and that token's id
  };
  const size_t n = normalized.size();
  std::vector<Best> best(n + 1);
  const float unk_score = d.min_score - 10.0f;
  auto offer = [&](size_t end, size_t start, int32_t id, float score) {
    Best& b = best[end];
    if (b.start == -1 || score > b.score) b = Best{score, int64_t(start), id};
  };
  for (size_t start = 0; start < n;) {
    const size_t char_len = std::min(LeadLength(uint8_t(normalized[start])), n - start);
    const float here = best[start].score;
    bool single = false;  // a piece covers exactly this character
    int32_t node = 0;
    for (size_t k = start; k < n; ++k) {
      node = d.Child(node, uint8_t(normalized[k]));
      if (node < 0) break;
      const int32_t id = d.node_piece[size_t(node)];
      if (id < 0) continue;
      offer(k + 1, start, id, d.scores[size_t(id)] + here);
      if (k + 1 - start == char_len) single = true;
    }
    if (!single) offer(start + char_len, start, d.unk_id, unk_score + here);
    start += char_len;
  }
  for (size_t end = n; end > 0;) {
    const Best& b = best[end];
    if (b.start < 0) break;  // unreachable: every character boundary is reached
    out.push_back(Token{b.id, normalized.substr(size_t(b.start), end - size_t(b.start))});
    end = size_t(b.start);
  }
  std::reverse(out.begin(), out.end());
  // A run of unknowns is one unknown (SentencePiece merges them for the decoder).
  size_t w = 0;
  for (size_t r = 0; r < out.size(); ++r) {
    if (w > 0 && out[r].id == d.unk_id && out[w - 1].id == d.unk_id) {
      const char* begin = out[w - 1].surface.data();
      out[w - 1].surface =
          std::string_view(begin, out[w - 1].surface.size() + out[r].surface.size());
    } else {
      out[w++] = out[r];
    }
  }
  out.resize(w);
  return out;
}

int32_t UnigramModel::unk_id() const {
  return data_ ? data_->unk_id : 0;
}
float UnigramModel::min_score() const {
  return data_ ? data_->min_score : 0.0f;
}
size_t UnigramModel::size() const {
  return data_ ? data_->scores.size() : 0;
}

}  // namespace gleaner::train::text
