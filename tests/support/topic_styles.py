"""More topic chats, six exchanges each, written in three other styles than `tests.support.topics`: terse replies of a
few words, long explanatory replies, and two friends chatting in lower case. Any three of the topics make a chat of
three clear topics whose right boundaries are at the first exchange of each topic (`three_topic_chats`)."""

from __future__ import annotations

import random
from collections.abc import Iterator

Topic = list[tuple[str, str]]

# terse: a reply of a few words, as a busy expert answers
GUITAR: Topic = [
    ("I just bought my first acoustic guitar", "Nice. Learn the open chords first."),
    ("Which chords should I start with?", "G, C, D and E minor."),
    ("My fingertips hurt after practicing", "Normal. Calluses form in two weeks."),
    ("ok", "Keep sessions short."),
    ("How often should I change the strings?", "Every three months."),
    ("Is a capo worth getting?", "Yes, for songs in other keys."),
]
SOURDOUGH: Topic = [
    ("How do I start a sourdough starter?", "Mix flour and water, feed it daily."),
    ("What flour works best for it?", "Whole rye or whole wheat."),
    ("My starter smells like nail polish", "It's hungry. Feed it twice a day."),
    ("When is it ready to bake with?", "When it doubles in four to six hours."),
    ("thanks", "Good luck with the loaf."),
    ("How long should the dough proof overnight?", "Twelve hours in the fridge."),
]
MOVING: Topic = [
    ("I'm moving to a new apartment next month", "Book the movers now."),
    ("How far ahead should I give notice to my landlord?", "Check your lease; usually 30 days."),
    ("Do I need renters insurance?", "Yes, it's cheap and covers theft."),
    ("What should I pack first?", "Books and out-of-season clothes."),
    ("and the deposit?", "Take photos at move-out to get it back."),
    ("Should I change my address with the post office?", "Yes, a week before the move."),
]
# long: replies of several sentences that explain
DOG: Topic = [
    ("My puppy keeps biting my hands when we play",
     "Puppies bite because they are teething and exploring. When the teeth touch your skin, say a short word like "
     "'ouch', stop playing for a few seconds and then offer a chew toy instead, so the puppy learns that toys are "
     "for biting and hands end the game."),
    ("How do I teach him to sit?",
     "Hold a treat just above his nose and move it slowly back over his head. As his head follows the treat his "
     "bottom lowers; the moment it touches the floor, say 'sit' and give the treat. Repeat in short sessions of "
     "five minutes a few times a day."),
    ("He pulls on the leash during walks",
     "Stop walking whenever the leash goes tight and only move on when it is slack again. Reward him with a treat "
     "when he walks next to your leg. A front-clip harness also reduces pulling while he learns."),
    ("great", "Consistency is the key: everyone in the house should use the same words and rules with the dog."),
    ("Should I use a crate at night?",
     "A crate helps with house training because dogs avoid soiling where they sleep. Make it cosy with a blanket, "
     "never use it as a punishment, and let the puppy out once during the night at first."),
    ("When can he meet other dogs at the park?",
     "Wait until about two weeks after his last vaccination. Until then, let him meet healthy, vaccinated dogs you "
     "know at home so that he still learns to play politely with other dogs."),
]
PYTHON: Topic = [
    ("My Python script says ModuleNotFoundError for requests",
     "The requests package is not installed in the interpreter that runs your script. Run 'python -m pip install "
     "requests' with the same python you use to start the script, ideally inside a virtual environment, and check "
     "which interpreter your editor uses."),
    ("How do I create a virtual environment?",
     "Run 'python -m venv .venv' in the project folder, then activate it with 'source .venv/bin/activate' on Linux "
     "or macOS or '.venv\\Scripts\\activate' on Windows. Packages you install afterwards stay inside that folder."),
    ("Now I get a KeyError when I read the JSON",
     "A KeyError means the dictionary has no such key. Print the keys with 'print(data.keys())' to see what the API "
     "returned, and use 'data.get(\"name\")' when a key may be missing, which gives None instead of raising."),
    ("still fails", "Then the response may be a list rather than a dict; index it first, for example data[0]['name']."),
    ("How can I step through the code?",
     "Put 'breakpoint()' on the line where you want to stop and run the script normally. You land in pdb, where 'n' "
     "runs the next line, 's' steps into a call, 'p variable' prints a value and 'c' continues."),
    ("Should I add type hints?",
     "Type hints make the code easier to read and let a checker like mypy catch wrong types before you run the "
     "script. Start with the function signatures of your own modules; you don't need them everywhere at once."),
]
MARATHON: Topic = [
    ("I signed up for my first marathon in October",
     "Congratulations! With about five months you have time for a gradual plan: build your weekly mileage slowly, "
     "run most of your kilometres at an easy conversational pace and add one long run every weekend."),
    ("How long should my longest training run be?",
     "Most first-time plans peak with a long run of 30 to 32 kilometres about three weeks before race day. Going "
     "further adds injury risk without much benefit; the taper and race-day adrenaline carry you the rest."),
    ("My knees ache after the long runs",
     "Knee pain often comes from increasing mileage too quickly or from worn-out shoes. Cut back for a week, check "
     "how many kilometres your shoes have, and add strength work for your hips and glutes twice a week."),
    ("What should I eat during the race?",
     "Take in about 30 to 60 grams of carbohydrates per hour from gels, chews or sports drink, starting around the "
     "first hour. Practise the same fuel on your long runs so your stomach is used to it."),
    ("ok thanks", "You're welcome. Remember to practise your race-day breakfast on a long run too."),
    ("How should I pace the first half?",
     "Start slightly slower than your goal pace for the first ten kilometres. Many first-timers go out too fast on "
     "adrenaline and pay for it after thirty kilometres; an even or slightly negative split is the goal."),
]
# casual: two friends, lower case, short lines
WEDDING: Topic = [
    ("omg my sister just got engaged!!", "no way!! congrats to her 🎉 when's the wedding?"),
    ("next june, and she asked me to be maid of honor", "that's so sweet, you're gonna have to plan the bachelorette lol"),
    ("yeah thinking a weekend in nashville", "nashville is perfect for that, so many bars with live music"),
    ("lol", "are you giving a speech at the reception too?"),
    ("ugh yes and i'm terrified of the speech", "just tell the story about the camping trip, everyone will cry"),
    ("also what do i even wear as maid of honor", "probably whatever dress color she picks for the bridesmaids"),
]
HIKING: Topic = [
    ("we're doing the hike up mount tam saturday, you in?", "yesss which trail are you taking"),
    ("dipsea trail from mill valley", "oof that one has like 700 stairs at the start"),
    ("haha i know, bring good boots", "i only have running shoes, is that ok for the trail"),
    ("should be fine if it's dry", "cool, should i pack lunch or are we eating at the summit"),
    ("pack sandwiches, there's a picnic spot near the top", "i'll bring trail mix and extra water too"),
    ("k", "see you at the trailhead at 8!"),
]
NEW_JOB: Topic = [
    ("guess who got the job at the design studio", "WHAT congrats!! the one you interviewed for last week?"),
    ("yes! start on the 3rd", "amazing, did they offer the salary you asked for"),
    ("a bit less but more vacation days", "honestly vacation days are worth it"),
    ("true, but i'm nervous about the first day", "you'll be great, just ask lots of questions in the first week"),
    ("what do i even wear to a design studio", "jeans and a nice top, designers are super casual"),
    ("haha ok, also have to tell my current boss", "give your notice friday so you can leave on a good note"),
]

TERSE = (GUITAR, SOURDOUGH, MOVING)
LONG = (DOG, PYTHON, MARATHON)
CASUAL = (WEDDING, HIKING, NEW_JOB)
STYLED = (*TERSE, *LONG, *CASUAL)


def three_topic_chats(seed: int, count: int) -> Iterator[tuple[Topic, Topic, Topic]]:
    """``count`` chats of three different topics drawn from every style, in a seeded order."""
    rng = random.Random(seed)
    for _ in range(count):
        first, second, third = rng.sample(STYLED, 3)
        yield first, second, third
