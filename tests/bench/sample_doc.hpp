#pragma once
// The docs the benchmarks publish: sample_doc, an order of about 200 bytes (the sink benchmarks), and
// leaderboard_doc, a leaderboard of about 50 kB (the patch benchmarks).
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace docsync::bench {

inline std::string sample_doc(int i) {
    return "{\"id\": " + std::to_string(i) +
           ", \"status\": \"paid\", \"total\": 1234.50, \"items\": [{\"sku\": \"A-1\", \"qty\": 2}, {\"sku\": "
           "\"B-7\", \"qty\": 1}], \"note\": \"" +
           std::string(60, 'n') + "\"}";
}

// A game's leaderboard as compact JSON: one entry per score, each about 130 bytes (a name with
// non-ASCII letters, a country, a score, counts and a ratio, a timestamp), so 385 scores make about
// 50 kB. Changing one score changes one number in the middle of the text.
inline std::string leaderboard_doc(int game, const std::vector<long>& scores) {
    static const char* const names[] = {"Zoë Ångström", "Łukasz Wróbel", "Søren Kierkegård", "Inés Peña",
                                        "Ṁaya Ōkubo",   "Chloé Dubois",  "Jürgen Groß",      "Ana Łopez"};
    static const char* const countries[] = {"SE", "PL", "DK", "ES", "JP", "FR", "DE", "MX"};
    std::string out = "{\"game\":" + std::to_string(game) + ",\"title\":\"Weekly ladder ☆\",\"entries\":[";
    out.reserve(scores.size() * 140 + 64);
    char entry[256];
    for (std::size_t i = 0; i < scores.size(); ++i) {
        std::snprintf(entry, sizeof entry,
                      "%s{\"rank\":%zu,\"player\":\"p-%05zu\",\"name\":\"%s %zu\",\"country\":\"%s\",\"score\":%ld,"
                      "\"games\":%zu,\"ratio\":%zu.%02zu,\"updated\":\"2026-12-01T%02zu:%02zu:00Z\"}",
                      i ? "," : "", i + 1, i * 7919 % 100000, names[i % 8], i, countries[i % 8], scores[i],
                      20 + i % 300, 1 + i % 3, i % 100, i % 24, i % 60);
        out += entry;
    }
    out += "]}";
    return out;
}

}  // namespace docsync::bench
