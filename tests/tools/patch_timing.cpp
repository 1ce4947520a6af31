// patch_timing: how long the patch core takes on a 50 kB doc with one field changed (docs/internals.md,
// "Patches"). Not a test (timings depend on the machine); build it in Release to read them:
//
//   cmake -S . -B build/rel -DCMAKE_BUILD_TYPE=Release && cmake --build build/rel --target patch_timing
//   build/rel/patch_timing [ROUNDS]
//
// Prints, for each doc shape, its size, the patch, and the median CPU time of diff() and apply().
#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

#include "patch/json_patch.hpp"

namespace {

// A leaderboard: an array of 600 entries, one score changed in the middle.
std::pair<std::string, std::string> leaderboard() {
    std::string a = R"({"game":7,"title":"Spring league","scores":[)", b;
    for (int i = 0; i < 600; ++i) {
        if (i) a += ',';
        a += R"({"player":"player-)" + std::to_string(i) + R"(","team":"team-)" + std::to_string(i % 17) +
             R"(","score":)" + std::to_string(100000 - i * 7) + R"(,"badges":["gold","streak"]})";
    }
    a += "]}";
    b = a;
    std::string needle = R"("score":)" + std::to_string(100000 - 300 * 7);
    b.replace(b.find(needle), needle.size(), R"("score":99999)");
    return {a, b};
}

// An order: an object of 800 line items keyed by SKU, one quantity changed.
std::pair<std::string, std::string> order() {
    std::string a = R"({"order":4711,"customer":{"id":12,"name":"Zoë"},"lines":{)", b;
    for (int i = 0; i < 800; ++i) {
        if (i) a += ',';
        a += R"("sku-)" + std::to_string(10000 + i) + R"(":{"qty":)" + std::to_string(1 + i % 9) +
             R"(,"price":")" + std::to_string(i % 97) + R"(.50","note":"\u00e9t\u00e9"})";
    }
    a += R"(},"total":"123456789012345678901234567890.00"})";
    b = a;
    std::string needle = R"("sku-10400":{"qty":)";
    b.replace(b.find(needle) + needle.size(), 1, "42");
    return {a, b};
}

// This thread's CPU time, in microseconds (other processes' load changes it less than wall time).
double cpu_us() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

template <class F>
double median_us(int rounds, F&& f) {
    std::vector<double> times;
    for (int r = 0; r < rounds; ++r) {
        double start = cpu_us();
        f();
        times.push_back(cpu_us() - start);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 2000;
    if (rounds <= 0) rounds = 2000;
    for (auto [name, docs] : {std::pair{"leaderboard", leaderboard()}, std::pair{"order", order()}}) {
        auto& [a, b] = docs;
        auto patch = docsync::patch::diff(a, b);
        if (!patch || docsync::patch::apply(a, *patch) != b) {
            std::cerr << name << ": the patch does not round-trip\n";
            return 1;
        }
        double d = median_us(rounds, [&] { (void)docsync::patch::diff(a, b); });
        double p = median_us(rounds, [&] { (void)docsync::patch::apply(a, *patch); });
        std::cout << name << ": " << a.size() << " bytes, patch " << patch->text.size() << " bytes ("
                  << (patch->form == docsync::patch::Form::JsonPatch ? "JSON Patch" : "merge patch") << ") "
                  << patch->text << "\n  diff " << d << " us, apply " << p << " us of CPU (median of "
                  << rounds << ")\n";
    }
    return 0;
}
