#include <gtest/gtest.h>
#include <signal.h>

#include <stdexcept>

#include "railyard/preempt.hpp"

using railyard::SignalWatcher;
using railyard::StopAction;

TEST(SignalWatcherSpec, ParsesNamesCaseAndSigPrefix) {
  SignalWatcher w("TERM=exit, sigusr1=requeue,Int=EXIT");
  EXPECT_EQ(w.action_for(SIGTERM), StopAction::kSaveExit);
  EXPECT_EQ(w.action_for(SIGUSR1), StopAction::kSaveRequeue);
  EXPECT_EQ(w.action_for(SIGINT), StopAction::kSaveExit);
  EXPECT_EQ(w.action_for(SIGUSR2), StopAction::kNone);
  EXPECT_EQ(w.pending(), StopAction::kNone);
  EXPECT_EQ(w.last_signal(), 0);
}

TEST(SignalWatcherSpec, EmptySpecWatchesNothing) {
  SignalWatcher w("");
  EXPECT_EQ(w.action_for(SIGTERM), StopAction::kNone);
}

TEST(SignalWatcherSpec, RejectsBadEntriesNamingThem) {
  auto message = [](const std::string& spec) {
    try {
      SignalWatcher w(spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("TERM=exit,FOO=exit").find("unknown signal 'FOO'"), std::string::npos);
  EXPECT_NE(message("TERM=stop").find("unknown action 'stop'"), std::string::npos);
  EXPECT_NE(message("TERM").find("expected SIGNAL=ACTION"), std::string::npos);
  EXPECT_NE(message("TERM=exit,").find("empty entry"), std::string::npos);
  EXPECT_NE(message("TERM=exit,SIGTERM=requeue").find("given twice"), std::string::npos);
  EXPECT_NE(message("KILL=exit").find("unknown signal 'KILL'"), std::string::npos);
}

TEST(SignalWatcherSpec, BadSpecInstallsNothing) {
  struct sigaction before {};
  sigaction(SIGTERM, nullptr, &before);
  EXPECT_THROW(SignalWatcher("TERM=exit,USR1=nap"), std::invalid_argument);
  struct sigaction after {};
  sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(before.sa_handler, after.sa_handler);
}

TEST(SignalWatcherFlag, SignalSetsFlagAndProcessSurvives) {
  SignalWatcher w("TERM=exit,USR1=requeue");
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_EQ(w.pending(), StopAction::kSaveExit);
  EXPECT_EQ(w.last_signal(), SIGTERM);
}

TEST(SignalWatcherFlag, StrongestActionWinsAndWeakerSignalChangesNothing) {
  SignalWatcher w("TERM=exit,USR1=requeue");
  ASSERT_EQ(raise(SIGUSR1), 0);
  EXPECT_EQ(w.pending(), StopAction::kSaveRequeue);
  // A TERM during the save (Slurm's, after the requeue) neither kills nor weakens the decision.
  ASSERT_EQ(raise(SIGTERM), 0);
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_EQ(w.pending(), StopAction::kSaveRequeue);
  EXPECT_EQ(w.last_signal(), SIGTERM);
}

TEST(SignalWatcherFlag, HandlerIsRestartingAndRestoredOnDestruction) {
  struct sigaction before {};
  sigaction(SIGUSR2, nullptr, &before);
  {
    SignalWatcher w("USR2=exit");
    struct sigaction now {};
    sigaction(SIGUSR2, nullptr, &now);
    EXPECT_NE(now.sa_flags & SA_RESTART, 0);
    EXPECT_EQ(now.sa_flags & SA_RESETHAND, 0);
  }
  struct sigaction after {};
  sigaction(SIGUSR2, nullptr, &after);
  EXPECT_EQ(before.sa_handler, after.sa_handler);
}

TEST(SignalWatcherFlag, OneWatcherPerProcess) {
  SignalWatcher w("TERM=exit");
  EXPECT_THROW(SignalWatcher("USR1=exit"), std::logic_error);
  // The failed second watcher did not disturb the first.
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_EQ(w.pending(), StopAction::kSaveExit);
}

TEST(SignalWatcherFlag, NewWatcherStartsClear) {
  {
    SignalWatcher w("TERM=exit");
    ASSERT_EQ(raise(SIGTERM), 0);
  }
  SignalWatcher w("TERM=exit");
  EXPECT_EQ(w.pending(), StopAction::kNone);
}

TEST(StopActionName, Words) {
  EXPECT_STREQ(railyard::stop_action_name(StopAction::kNone), "none");
  EXPECT_STREQ(railyard::stop_action_name(StopAction::kSaveExit), "exit");
  EXPECT_STREQ(railyard::stop_action_name(StopAction::kSaveRequeue), "requeue");
}
