#pragma once
// The doc the sink benchmarks publish: an order of about 200 bytes, its id `i`.
#include <string>

namespace docsync::bench {

inline std::string sample_doc(int i) {
    return "{\"id\": " + std::to_string(i) +
           ", \"status\": \"paid\", \"total\": 1234.50, \"items\": [{\"sku\": \"A-1\", \"qty\": 2}, {\"sku\": "
           "\"B-7\", \"qty\": 1}], \"note\": \"" +
           std::string(60, 'n') + "\"}";
}

}  // namespace docsync::bench
