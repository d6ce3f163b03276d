// NgramTable: the distinct n-grams of one order in one sequence, with counts, for clipped matches.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tx::metrics {

// The n-grams of order `n` of `seq` (words as string_views, characters as char32_t), sorted and
// counted. Sorting keeps it deterministic and lets two tables be matched by a merge, with no
// hashing of variable-length keys. The table refers to `seq`, which must outlive it.
template <typename T>
class NgramTable {
 public:
  struct Entry {
    std::size_t offset;  // where one occurrence starts in the sequence
    int64_t count;
  };

  // Every start offset of a sequence, sorted by the up to `max_n` elements from there, and the
  // length of the prefix each shares with the one before it (capped at max_n). Equal n-grams of
  // every order n <= max_n are then adjacent: strings sharing an n-element prefix sort together
  // (a shorter string never falls inside such a group), so one sort serves all orders.
  struct SortedStarts {
    std::vector<std::size_t> starts;
    std::vector<int> common;  // common[0] is 0
  };

  static SortedStarts sort_starts(const std::vector<T>& seq, int max_n) {
    SortedStarts sorted;
    sorted.starts.resize(seq.size());
    for (std::size_t i = 0; i < seq.size(); ++i) sorted.starts[i] = i;
    const auto length = [&](std::size_t i) {
      return std::min(seq.size() - i, static_cast<std::size_t>(std::max(max_n, 0)));
    };
    std::sort(sorted.starts.begin(), sorted.starts.end(), [&](std::size_t a, std::size_t b) {
      return std::lexicographical_compare(seq.begin() + a, seq.begin() + a + length(a),
                                          seq.begin() + b, seq.begin() + b + length(b));
    });
    sorted.common.assign(seq.size(), 0);
    for (std::size_t k = 1; k < seq.size(); ++k) {
      const std::size_t a = sorted.starts[k - 1], b = sorted.starts[k];
      const std::size_t limit = std::min(length(a), length(b));
      std::size_t c = 0;
      while (c < limit && seq[a + c] == seq[b + c]) ++c;
      sorted.common[k] = static_cast<int>(c);
    }
    return sorted;
  }

  NgramTable(const std::vector<T>& seq, int n) : NgramTable(seq, n, sort_starts(seq, n)) {}

  // From sort_starts(seq, m) with m >= n: a start joins the previous entry when it shares n
  // elements with the start sorted before it (which then is that entry's last occurrence).
  NgramTable(const std::vector<T>& seq, int n, const SortedStarts& sorted) : seq_(&seq), n_(n) {
    if (n < 1) return;
    for (std::size_t k = 0; k < sorted.starts.size(); ++k) {
      const std::size_t start = sorted.starts[k];
      if (start + n > seq.size()) continue;  // too close to the end for an n-gram
      if (sorted.common[k] >= n) {
        ++entries_.back().count;
      } else {
        entries_.push_back({start, 1});
      }
      ++total_;
    }
  }

  const std::vector<Entry>& entries() const { return entries_; }
  int64_t total() const { return total_; }  // n-grams counted with repetition
  bool empty() const { return total_ == 0; }

  // For each entry of this table, its count in `other` (0 when absent): a merge of two sorted
  // lists.
  std::vector<int64_t> counts_in(const NgramTable& other) const {
    std::vector<int64_t> counts(entries_.size(), 0);
    std::size_t j = 0;
    for (std::size_t i = 0; i < entries_.size() && j < other.entries_.size();) {
      const int c = compare(*seq_, entries_[i].offset, *other.seq_, other.entries_[j].offset);
      if (c < 0) {
        ++i;
      } else if (c > 0) {
        ++j;
      } else {
        counts[i++] = other.entries_[j++].count;
      }
    }
    return counts;
  }

  // Matches clipped by the other table's counts: sum over n-grams of min(count here, count there).
  int64_t clipped_matches(const NgramTable& other) const {
    const std::vector<int64_t> there = counts_in(other);
    int64_t matches = 0;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      matches += std::min(entries_[i].count, there[i]);
    }
    return matches;
  }

 private:
  // Three-way lexicographic comparison of the n-grams at a[i..] and b[j..].
  int compare(const std::vector<T>& a, std::size_t i, const std::vector<T>& b,
              std::size_t j) const {
    for (int k = 0; k < n_; ++k) {
      if (a[i + k] < b[j + k]) return -1;
      if (b[j + k] < a[i + k]) return 1;
    }
    return 0;
  }

  const std::vector<T>* seq_;
  int n_;
  std::vector<Entry> entries_;
  int64_t total_ = 0;
};

}  // namespace tx::metrics
