# Read by ctest after the integration tests are discovered (CMakeLists.txt): the cases that bound a
# time a neighbour's CPU could stretch run alone (RUN_SERIAL), and first (COST 1000: CMakeLists.txt
# says why). The other cases take turns on the cluster in the environment (RESOURCE_LOCK
# docsync_env_cluster) beside the unit and gateway tests.
# A case renamed here and not in its source fails ctest's start, loudly.
foreach(name
    # about one doc query per 100 ms round: a slower loop of updates means more rounds
    "a hot row updated 5000 times costs a few percent as many doc queries, and the doc ends right"
    # stopping the liveness watch within 2 s
    "redis liveness: polls report subscribed db: channels, warm and touch reach their callbacks"
    # 1000 acknowledgements within 200 ms with Redis gone
    "watermark: Redis gone holds nothing back, the newest position is written once it is back"
    # three rounds of publishes within 3 s with a master down
    "redis cluster: a master down fails only its docs, fast, a restart without its data is reported"
    # every statement of the executor under a 1 s, then a 300 ms statement timeout, setup included
    "hostile doc queries fail as outcomes while other docs keep updating and every ticket completes"
    "a doc query past the statement timeout holds its transaction while the others complete"
    # a 1.2 s compute under a 1.5 s statement timeout, two side by side within 2 s
    "portable: the computes of one reader role take turns in the executor, two reader roles run side by side")
  set_tests_properties("integration/${name}" PROPERTIES RUN_SERIAL TRUE COST 1000)
endforeach()
